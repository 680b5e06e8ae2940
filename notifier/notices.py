"""The triggers that are not a field diff: a failed sync, a refused render, prunes waiting.

Each reads the Application as Argo CD's API returns it now (the webhook body is only a hint, used
when the API no longer shows the condition), and becomes a ``notice`` view the templates render.
Field names follow Argo CD's Application CRD (tests/reference/argo-cd): ``status.operationState``
(``phase``, ``message``, ``syncResult.resources[]``), ``status.conditions[]`` (``type``,
``message``) and ``status.resources[].requiresPruning``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from driftguard.cause import gating_line, parse_condition
from driftguard.redact import scrub_text
from driftguard.report import AppInfo
from notifier.render import notice_view

__all__ = ["NOTICE_TRIGGERS", "notice_for"]

NOTICE_TRIGGERS = {
    "on-sync-failed": "sync-failed",
    "on-render-refused": "render-refused",
    "on-prune-pending": "prune-pending",
}
MAX_LINES = 20
MESSAGE_LINES = 6


def _dig(obj: Any, *path: str) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _name(res: Mapping[str, Any]) -> str:
    ns = str(res.get("namespace") or "")
    return f"{res.get('kind') or '?'} {ns + '/' if ns else ''}{res.get('name') or '?'}"


def _first_lines(text: str, n: int = MESSAGE_LINES) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines()]
    cut = "\n".join(lines[:n])
    return scrub_text(cut[:1500] + ("…" if len(lines) > n or len(cut) > 1500 else ""))


def notice_for(
    trigger: str, app: Mapping[str, Any], info: AppInfo, *, body: Mapping[str, Any], link: str
) -> dict[str, Any]:
    """The notice view for one of NOTICE_TRIGGERS."""
    event = NOTICE_TRIGGERS[trigger]
    hinted = _dig(body, "app") or {}
    if event == "sync-failed":
        op = _dig(app, "status", "operationState") or _dig(hinted, "status", "operationState") or {}
        failed = [
            f"{_name(r)}: {scrub_text(str(r.get('message') or ''))[:200]}"
            for r in _items(_dig(op, "syncResult", "resources"))
            if r.get("status") == "SyncFailed" or r.get("hookPhase") in ("Failed", "Error")
        ]
        return notice_view(
            info,
            event=event,
            message=_first_lines(str(op.get("message") or "")),
            lines=failed[:MAX_LINES],
            link=link,
        )
    if event == "render-refused":
        conditions = [
            c
            for source in (app, hinted)
            for c in _items(_dig(source, "status", "conditions"))
            if c.get("type") == "ComparisonError"
        ]
        raw = str(conditions[0].get("message") or "") if conditions else ""
        message = _first_lines(raw)
        # the gating keys follow up to 30 lines of detail: past the first lines, quote them as lines
        cause = parse_condition(raw)
        keys = [gating_line(k) for k in cause.keys] if cause else []
        return notice_view(
            info, event=event, message=message, lines=[k for k in keys if k not in message], link=link
        )
    pending: dict[tuple[str, str, str, str], Mapping[str, Any]] = {}
    for r in _items(_dig(app, "status", "resources")):
        if r.get("requiresPruning") is True:
            pending.setdefault(_key(r), r)
    for r in _items(_dig(app, "status", "operationState", "syncResult", "resources")):
        if r.get("status") == "PruneSkipped":
            pending.setdefault(_key(r), r)
    counts = Counter(str(r.get("kind") or "?") for r in pending.values())
    names = sorted(_name(r) for r in pending.values())
    return notice_view(
        info,
        event=event,
        counts=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        lines=names[:MAX_LINES] + ([f"… +{len(names) - MAX_LINES}"] if len(names) > MAX_LINES else []),
        link=link,
        severity="warning",
    )


def _key(r: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(r.get("group") or ""),
        str(r.get("kind") or ""),
        str(r.get("namespace") or ""),
        str(r.get("name") or ""),
    )

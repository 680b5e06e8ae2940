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

from driftguard.cause import REFUSED, gating_line, parse_condition, unwrap
from driftguard.redact import scrub_text
from driftguard.report import AppInfo
from notifier.digest import PROTECTED_KINDS
from notifier.render import notice_view

__all__ = ["NOTICE_TRIGGERS", "label_of", "notice_for"]

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
) -> dict[str, Any] | None:
    """The notice view for one of NOTICE_TRIGGERS; None when it would have nothing to say."""
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
        # the quoted text starts with driftguard's own lines (or the failing tool's): Argo CD's rpc
        # wrapping is stripped as driftguard/cause.py strips it, the line breaks are kept
        message = _first_lines(unwrap(raw))
        cause = parse_condition(raw)
        keys = [gating_line(k) for k in cause.keys] if cause else []
        # Argo CD marks every live resource requiresPruning when no target could be loaded
        # (controller/state.go v3.5.1, failedToLoadObjs): what this render would remove, protected kinds first
        counts, names = _pending(app if _items(_dig(app, "status", "resources")) else hinted)
        view = notice_view(
            info,
            event=event,
            message=message,
            lines=[k for k in keys if k not in message],
            counts=counts,
            link=link,
        )
        view["label"] = label_of(raw)
        view["names"] = names
        return view
    counts, names = _pending(app)
    if not counts:
        return None  # nothing waits to be pruned: no notice that lists nothing
    return notice_view(info, event=event, counts=counts, lines=names, link=link, severity="warning")


def label_of(message: str) -> str:
    """What a ComparisonError is: ``refused`` (a driftguard guard), ``git``, ``repository``, ``cluster`` or ``other``.

    Read from Argo CD's own text (controller/state.go wraps the repo-server's error; go-git's and
    the kube client's words come through unchanged).
    """
    cause = parse_condition(message)
    if cause is not None and cause.kind == REFUSED:
        return "refused"
    text = message.lower()
    if any(w in text for w in _GIT):
        return "git"
    if any(w in text for w in _CLUSTER):
        return "cluster"
    if any(w in text for w in _REPOSITORY):
        return "repository"
    return "other"


_GIT = (
    "authentication required",
    "authentication failed",
    "repository not found",
    "could not read username",
    "permission denied (publickey",
    "ssh: handshake failed",
    "knownhosts",
    "failed to list refs",
    "couldn't find remote ref",
    "unable to resolve",
    "git fetch",
    "git checkout",
    "ls-remote",
    "reference not found",
)
_CLUSTER = (
    "cluster",
    "unable to connect to the server",
    "the server has asked for the client to provide credentials",
    "could not find the requested resource",
)
_REPOSITORY = ("repo-server", "repository", "manifest", "helm", "kustomize", "plugin")


def _pending(app: Mapping[str, Any]) -> tuple[dict[str, int], list[str]]:
    """Counts by kind and names of what waits to be pruned, protected kinds first (named), then by count."""
    pending: dict[tuple[str, str, str, str], Mapping[str, Any]] = {}
    for r in _items(_dig(app, "status", "resources")):
        if r.get("requiresPruning") is True:
            pending.setdefault(_key(r), r)
    for r in _items(_dig(app, "status", "operationState", "syncResult", "resources")):
        if r.get("status") == "PruneSkipped":
            pending.setdefault(_key(r), r)
    counts = Counter(str(r.get("kind") or "?") for r in pending.values())

    def rank(kind: str) -> tuple[int, int]:
        return (
            PROTECTED_KINDS.index(kind) if kind in PROTECTED_KINDS else len(PROTECTED_KINDS),
            -counts[kind],
        )

    ordered = dict(sorted(counts.items(), key=lambda kv: (*rank(kv[0]), kv[0])))
    names = sorted(
        (_name(r) for r in pending.values()),
        key=lambda n: (*rank(n.split(" ", 1)[0]), n),
    )
    return ordered, names[:MAX_LINES] + ([f"… +{len(names) - MAX_LINES}"] if len(names) > MAX_LINES else [])


def _key(r: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(r.get("group") or ""),
        str(r.get("kind") or ""),
        str(r.get("namespace") or ""),
        str(r.get("name") or ""),
    )

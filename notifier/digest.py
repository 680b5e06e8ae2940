"""What an alert says, at any scale: a report view condensed for a person reading a phone.

A prune or missing set is summarised by kind with counts (protected kinds first, always named),
then the first few names per kind; field changes keep a readable path and short values, newest
first. Channels fit this digest into their limits by bytes after rendering and add one "N more"
line that states exactly what was left out (see notifier/channels/fit.py).

Severity is raised to critical when a protected kind or more resources than the shrink guard's
``max-prune-count`` would go; the defaults mirror cmp_plugin/params.py (``protected-kinds``,
``max-prune-count``), which the notifier cannot import (apps do not import each other).
"""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from driftguard.drift import HUMAN, MISSING, PRUNE_CANDIDATE
from driftguard.identity import who

# the readable path and short values are shared with the CMP's PR check, so they live below the apps
from driftguard.readable import NAME_CHARS, PATH_CHARS, VALUE_CHARS, readable_path, short

__all__ = [
    "MAX_PRUNE_COUNT",
    "NAMES_PER_KIND",
    "PROTECTED_KINDS",
    "VALUE_CHARS",
    "age",
    "digest",
    "friendly",
    "readable_path",
    "short",
    "trim_notice",
]

PROTECTED_KINDS = ("PersistentVolumeClaim", "Namespace", "CustomResourceDefinition", "StatefulSet")
MAX_PRUNE_COUNT = 10
NAMES_PER_KIND = 5
TITLE_VALUE = 40
NOTICE_MESSAGE = 1500
CAUSE_CHARS = 300
NOTICE_LINES = 30
# well-known fields, for a title that says what changed in words (the readable path stays next to it)
_FRIENDLY = (
    (re.compile(r'resources\.limits\["nvidia\.com/gpu"\]$'), "gpu-limit"),
    (re.compile(r'resources\.requests\["nvidia\.com/gpu"\]$'), "gpu-request"),
    (re.compile(r"resources\.limits\.cpu$"), "cpu-limit"),
    (re.compile(r"resources\.requests\.cpu$"), "cpu-request"),
    (re.compile(r"resources\.limits\.memory$"), "memory-limit"),
    (re.compile(r"resources\.requests\.memory$"), "memory-request"),
    (re.compile(r"(^|\.)replicas$"), "replicas"),
    (re.compile(r"\.image$"), "image"),
)


def friendly(readable: str) -> str:
    """A label key (``gpu-limit``...) for well-known fields, or "" (templates translate the key)."""
    for pattern, label in _FRIENDLY:
        if pattern.search(readable):
            return label
    return ""


def _parse_time(raw: Any) -> datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def age(when: datetime, now: datetime) -> tuple[int, str]:
    """(amount, unit) for "3 min ago": unit one of s, min, h, d."""
    seconds = max(0, int((now - when).total_seconds()))
    if seconds < 60:
        return seconds, "s"
    if seconds < 3600:
        return seconds // 60, "min"
    if seconds < 86400:
        return seconds // 3600, "h"
    return seconds // 86400, "d"


def zone_label(local: datetime, locale: str = "en") -> str:
    """An unambiguous zone: ``UTC``, ``UTC+8``, ``UTC-3:30``; zh-CN says 北京时间 for UTC+8.

    Never the zone's abbreviation: Asia/Shanghai's is "CST", which also reads as US Central.
    """
    offset = local.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset is not None else 0
    if minutes == 0:
        return "UTC"
    if minutes == 480 and locale == "zh-CN":
        return "北京时间"
    sign = "+" if minutes > 0 else "-"
    h, m = divmod(abs(minutes), 60)
    return f"UTC{sign}{h}" + (f":{m:02d}" if m else "")


def _when(raw: Any, tz: ZoneInfo, now: datetime, locale: str = "en") -> dict[str, Any] | None:
    when = _parse_time(raw)
    if when is None:
        return None
    n, unit = age(when, now)
    local = when.astimezone(tz)
    return {"at": local.strftime("%Y-%m-%d %H:%M"), "zone": zone_label(local, locale), "ago": n, "unit": unit}


def _reverted(raw: Any, tz: ZoneInfo, locale: str) -> dict[str, Any] | None:
    """When and by what a drift was put back (notifier/alerts/reverted.py): the clock in the channel's zone."""
    if not isinstance(raw, dict):
        return None
    when = _parse_time(raw.get("at"))
    if when is None:
        return None
    local = when.astimezone(tz)
    return {
        "at": local.strftime("%H:%M:%S"),
        "zone": zone_label(local, locale),
        "by": str(raw.get("by") or ""),
        "witnessed": bool(raw.get("witnessed", True)),
    }


def digest(
    v: dict[str, Any],
    *,
    tz: ZoneInfo | None = None,
    now: datetime | None = None,
    protected: tuple[str, ...] = PROTECTED_KINDS,
    max_prune_count: int = MAX_PRUNE_COUNT,
    locale: str = "en",
) -> dict[str, Any]:
    """The alert's content from a report view (notifier.render.view); raw strings, channels escape.

    ``locale`` is the channel's: the actor lines (``who``) are written in it.
    """
    tz = tz or ZoneInfo("UTC")
    now = now or datetime.now(UTC)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    fields: list[dict[str, Any]] = []
    classes: set[str] = set()
    for res in v["resources"]:
        for c in res["changes"]:
            cls = c["class"]
            classes.add(cls)
            if cls in (MISSING, PRUNE_CANDIDATE):
                g = groups.setdefault(
                    (cls, res["kind"]),
                    {
                        "cls": cls,
                        "kind": short(res["kind"], NAME_CHARS),
                        "count": 0,
                        "protected": res["kind"] in protected,
                        "names": [],
                        "_first": None,
                    },
                )
                g["count"] += 1
                g["names"].append(_where(res))
                if g["_first"] is None or _where(res) < _where(g["_first"]):
                    g["_first"] = res
                continue
            actor = c.get("actor")
            readable = c.get("readable") or readable_path(c["path"])
            fields.append(
                {
                    "cls": cls,
                    "kind": short(res["kind"], NAME_CHARS),
                    "name": _where(res),
                    "short_name": short(res["name"], NAME_CHARS),
                    "path": short(c["path"], PATH_CHARS),
                    "readable": readable,
                    "label": friendly(readable),
                    "old": short(c["old"]) if c["old"] != "" else '""',
                    "new": short(c["new"]) if c["new"] != "" else '""',
                    "manager": short((actor or {}).get("manager") or "", NAME_CHARS),
                    # the person behind it, from the identity join (driftguard/identity.py): "" when
                    # unknown; matched False when the join ran and no record matched
                    "user": short((actor or {}).get("user") or "", NAME_CHARS),
                    "matched": (actor or {}).get("matched"),
                    "source": (actor or {}).get("source") or "",
                    "when": _when((actor or {}).get("time"), tz, now, locale),
                    # the actor line in the channel's locale and zone (driftguard/identity.py who)
                    "who": _who(actor, tz, now, locale),
                    # the exact command that keeps a human change in Git (docs/codify.md), never cut
                    "codify": _codify(v["app"], res, c) if cls == HUMAN else "",
                    "_t": (actor or {}).get("time") or "",
                    "_res": res,
                }
            )
    fields.sort(key=lambda f: f["_t"], reverse=True)  # newest first: the title is the newest change
    first_res = None
    for f in fields:
        del f["_t"]
        res = f.pop("_res")
        first_res = first_res or res
    ordered = sorted(
        groups.values(),
        key=lambda g: (
            0 if g["protected"] else 1,
            protected.index(g["kind"]) if g["kind"] in protected else 0,
            0 if g["cls"] == MISSING else 1,
            -g["count"],
            g["kind"],
        ),
    )
    if ordered:
        first_res = ordered[0]["_first"]  # the first item every channel lists
    for g in ordered:
        del g["_first"]
        g["names"].sort()
        g["more_names"] = max(0, len(g["names"]) - NAMES_PER_KIND)
        g["names"] = g["names"][:NAMES_PER_KIND]
    going = sum(g["count"] for g in ordered if g["cls"] == PRUNE_CANDIDATE)
    missing = sum(g["count"] for g in ordered if g["cls"] == MISSING)
    severity = v["severity"]
    if any(g["protected"] for g in ordered) or going > max_prune_count or missing > max_prune_count:
        severity = "critical"
    app = v["app"]
    return {
        "app": {
            "name": short(app["name"], 253),
            "project": short(app.get("project") or "", NAME_CHARS),
            "cluster": short(app.get("cluster") or "", NAME_CHARS),
            "namespace": short(app.get("destination_namespace") or "", NAME_CHARS),
            "revision": short((app.get("revision") or "")[:12], 12),
            "sync": short(app.get("sync_status") or "", 40),
            "health": short(app.get("health_status") or "", 40),
        },
        "severity": severity,
        "link": v.get("link") or "",
        "resource": {"kind": short(first_res["kind"], NAME_CHARS), "name": _where(first_res)}
        if first_res
        else None,
        "resource_link": resource_link(v.get("link") or "", first_res) if first_res else "",
        "cause": _cause(v.get("cause")),
        "who": next((f["who"] for f in fields if f["cls"] == HUMAN and f["user"]), "")
        or next((f["who"] for f in fields if f["who"]), ""),
        "groups": ordered,
        "fields": fields,
        "total": v["total"],
        "prune_total": going,
        "missing_total": missing,
        "protected": [g["kind"] for g in ordered if g["protected"]],
        "classes": sorted(classes),
        "todo": [k for k in ("prune", "missing", "human") if _todo(k, classes)]
        if not v.get("reverted")
        else ["reverted"],
        "reverted": _reverted(v.get("reverted"), tz, locale),
        "suppressed": dict(v.get("suppressed") or {}),
        "headline": {
            **fields[0],
            "old": short(fields[0]["old"], TITLE_VALUE),
            "new": short(fields[0]["new"], TITLE_VALUE),
        }
        if fields
        else None,
        "top": ordered[0] if ordered else None,
    }


def resource_link(app_link: str, res: dict[str, Any]) -> str:
    """The Application's page with one resource selected, as the Argo CD v3 UI encodes it.

    ``?node=<group>/<kind>/<namespace>/<name>/<container>`` opens the resource's panel:
    ui/src/app/applications/components/application-details/application-details.tsx (``SelectNode``
    writes it, ``NodeInfo`` reads it) with the key of ui/src/app/applications/components/utils.tsx
    ``nodeKey``. Each part is percent-encoded (names come from the cluster); "" without a link.
    """
    if not app_link:
        return ""
    node = "/".join(
        str(res.get(k) or "") for k in ("group", "kind", "namespace", "name")
    )  # a core group and a cluster-scoped namespace are empty, as nodeKey writes them
    return f"{app_link}?{urlencode({'node': node + '/0'}, safe='/')}"


def _who(actor: dict[str, Any] | None, tz: ZoneInfo, now: datetime, locale: str) -> str:
    if not actor or not (actor.get("manager") or actor.get("user")):
        return ""
    return short(
        who(
            manager=actor.get("manager") or "",
            time=actor.get("time"),
            user=actor.get("user") or "",
            matched=actor.get("matched"),
            now=now.timestamp(),
            locale=locale,
            tz=tz,
        ),
        2 * NAME_CHARS + 60,
    )


def _cause(raw: Any) -> dict[str, Any] | None:
    """A report's cause (driftguard.cause.Cause.to_json), bounded again: a view may come from a file."""
    if not isinstance(raw, dict) or raw.get("kind") not in ("render-refused", "render-failed"):
        return None
    if not (raw.get("reason") or raw.get("guard")):
        return None  # nothing to quote
    keys = [k for k in raw.get("keys") or [] if isinstance(k, dict) and k.get("key")][:3]
    return {
        "kind": raw["kind"],
        "guard": short(str(raw.get("guard") or ""), 40),
        "reason": short(str(raw.get("reason") or ""), CAUSE_CHARS),
        "gating": [  # not "keys": a template's c.keys would be the dict method
            {
                "key": short(str(k["key"]), NAME_CHARS),
                "origin": "value" if k.get("origin") == "value" else "chart-default",
                "where": short(str(k.get("where") or ""), NAME_CHARS),
            }
            for k in keys
        ],
    }


def trim_notice(v: dict[str, Any]) -> dict[str, Any]:
    """A notice view with Argo CD's message and lines cut to what a chat message can carry."""
    lines = [short(line, 300) for line in v.get("lines", [])[:NOTICE_LINES]]
    if len(v.get("lines", [])) > NOTICE_LINES:
        lines.append(f"… +{len(v['lines']) - NOTICE_LINES}")
    return {
        **v,
        "message": _lines(v.get("message") or "", NOTICE_MESSAGE) if v.get("message") else "",
        "lines": lines,
    }


def _lines(text: str, limit: int) -> str:
    """Argo CD's message bounded, its line breaks kept (a refusal is several lines; channels that have
    line breaks show them): each line one line, at most ``limit`` characters in all."""
    out: list[str] = []
    used = 0
    for raw in str(text).splitlines():
        line = short(raw, limit)
        if not line.strip():
            continue
        if used + len(line) > limit:
            out.append("…")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def localize_notice(v: dict[str, Any], tz: ZoneInfo, locale: str) -> dict[str, Any]:
    """A notice's times in the channel's zone and words (the ``reverted`` clock of a drift-reverted notice)."""
    if not v.get("reverted"):
        return v
    return {**v, "reverted": _reverted(v["reverted"], tz, locale)}


def _todo(key: str, classes: set[str]) -> bool:
    return {"prune": PRUNE_CANDIDATE, "missing": MISSING, "human": HUMAN}[key] in classes


def _where(res: dict[str, Any]) -> str:
    ns = res.get("namespace") or ""
    return short(f"{ns}/{res['name']}" if ns else str(res["name"]), NAME_CHARS)


def _codify(app: dict[str, Any], res: dict[str, Any], c: dict[str, Any]) -> str:
    """``driftguard-cmp codify ... --change SPEC`` for a human change; "" for a masked value."""
    from driftguard.codify_line import change_spec, codify_command
    from driftguard.redact import MASK

    if not app.get("codify") or (isinstance(c["new"], str) and c["new"].startswith(MASK)):
        return ""
    spec = change_spec(res["kind"], res["namespace"], res["name"], c["path"], c["new"])
    return codify_command(shlex.split(app["codify"]), spec)

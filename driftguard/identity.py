"""Who made a change: identity records from the API server, and the rule that joins them to a drift.

Two sources describe the same write: the audit webhook backend (an ``audit.k8s.io/v1`` Event, at
``Metadata`` level: no request or response bodies) and an observe-only admission webhook (an
``admission.k8s.io/v1`` AdmissionReview). Both become one :class:`IdentityEvent`; the bodies are never
kept, only who, what object, which field manager and when.

The join (:func:`best_match`), for one drifted field whose managedFields entry names ``manager`` at
``time`` on the live object with ``uid`` / ``resourceVersion``:

1. the event is about the same object: the same UID when both carry one, else the same API group,
   resource (the kind's plural) or kind, namespace and name;
2. the event's field manager is the managedFields entry's manager (the ``fieldManager`` the request
   named, else the API server's default, the user agent up to its first ``/``; an admission record
   without ``options.fieldManager`` matches any manager);
3. an audit record outranks every admission record (issue 31): the API server writes the audit
   Event itself after the write succeeded, while a review only says a write was asked for, and a
   forged or replayed review could claim any user for the object's UID and resourceVersion;
4. then an event whose ``resourceVersion`` is the live object's is taken first (exact); otherwise
   the event's time is within ``window`` seconds (default 5) of the managedFields time, which the
   API server truncates to the second; the closest wins, the newest on a tie.

Nothing matching: no identity, and the alert says that no identity record matched.
"""

from __future__ import annotations

import json
import re
import time as _time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from driftguard.drift import HUMAN
from driftguard.report import DriftReport

__all__ = [
    "JOIN_WINDOW",
    "MUTATING_VERBS",
    "IdentityEvent",
    "IdentityStore",
    "attribute",
    "best_match",
    "from_admission",
    "from_audit",
    "guess_resource",
    "parse_time",
    "who",
]

JOIN_WINDOW = 5.0
"""Seconds between an event and a managedFields time (truncated to the second) that still match."""
MUTATING_VERBS = frozenset({"create", "update", "patch", "delete"})
_MAX = 256
"""Longest string kept from a record: names are 253, usernames and agents are capped."""
_MAX_LIST = 16


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _s(v: Any, limit: int = _MAX) -> str:
    """A string field, capped, control characters replaced (it reaches logs, alerts and a page)."""
    return _CONTROL.sub("?", v[:limit]) if isinstance(v, str) else ""


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _strings(v: Any) -> tuple[str, ...]:
    return tuple(_s(x) for x in v[:_MAX_LIST] if isinstance(x, str)) if isinstance(v, list) else ()


def parse_time(value: Any) -> float | None:
    """RFC 3339 (``2026-11-29T14:02:07Z``, with or without micro-seconds) to epoch seconds; None if not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def guess_resource(kind: str) -> str:
    """A kind's plural resource name, the API server's own guess.

    The rule of k8s.io/apimachinery pkg/api/meta/restmapper.go ``UnsafeGuessKindToResource``:
    lower-case; ``s`` ending takes ``es``, ``y`` ending takes ``ies``, else ``s``.
    """
    k = kind.lower()
    if not k:
        return ""
    if k.endswith("s"):
        return k + "es"
    if k.endswith("y"):
        return k[:-1] + "ies"
    return k + "s"


def _manager_from_agent(agent: str) -> str:
    # k8s.io/apiserver pkg/endpoints/handlers/rest.go prefixFromUserAgent: the agent up to its first "/"
    return agent.split("/", 1)[0][:128]


@dataclass(frozen=True)
class IdentityEvent:
    """One write as the API server saw it: who, on which object, with which field manager, when."""

    source: str
    """``audit`` or ``admission``."""
    event_id: str
    """auditID, or the AdmissionReview request UID: a resent batch is stored once."""
    at: float
    """When the write happened (audit: the stage timestamp; admission: when the review arrived)."""
    user: str
    verb: str
    group: str = ""
    resource: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    resource_version: str = ""
    subresource: str = ""
    field_manager: str = ""
    user_agent: str = ""
    groups: tuple[str, ...] = ()
    source_ips: tuple[str, ...] = ()
    impersonated: str = ""
    stage: str = ""
    received_at: float | None = None
    """Audit's requestReceivedTimestamp."""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "event_id": self.event_id,
            "at": self.at,
            "user": self.user,
            "groups": list(self.groups),
            "impersonated": self.impersonated,
            "verb": self.verb,
            "object": {
                "group": self.group,
                "resource": self.resource,
                "kind": self.kind,
                "namespace": self.namespace,
                "name": self.name,
                "uid": self.uid,
                "resourceVersion": self.resource_version,
                "subresource": self.subresource,
            },
            "field_manager": self.field_manager,
            "user_agent": self.user_agent,
            "source_ips": list(self.source_ips),
            "stage": self.stage,
            "request_received_at": self.received_at,
        }


def from_audit(ev: Any) -> IdentityEvent | None:
    """An audit Event worth keeping (a completed, successful, non-dry-run write), or None.

    ValueError when it is not an audit Event at all. Only metadata is read: ``requestObject`` and
    ``responseObject`` (present at Request level and above) are never looked at.
    """
    if (
        not isinstance(ev, dict)
        or not isinstance(ev.get("auditID"), str)
        or not isinstance(ev.get("verb"), str)
    ):
        raise ValueError("an item is not an audit Event (auditID and verb are required)")
    verb = ev["verb"]
    if verb not in MUTATING_VERBS or ev.get("stage", "ResponseComplete") != "ResponseComplete":
        return None
    status = ev.get("responseStatus")
    code = status.get("code") if isinstance(status, dict) else None
    if isinstance(code, int) and code >= 400:
        return None  # the write did not happen
    user = _obj(ev.get("user"))
    ref = _obj(ev.get("objectRef"))
    uri = _s(ev.get("requestURI"), 4096)
    query = parse_qs(urlsplit(uri).query)
    if query.get("dryRun"):
        return None
    agent = _s(ev.get("userAgent"))
    at = parse_time(ev.get("stageTimestamp")) or parse_time(ev.get("requestReceivedTimestamp"))
    if at is None:
        raise ValueError("an audit Event has no stageTimestamp or requestReceivedTimestamp")
    imp = _obj(ev.get("impersonatedUser"))
    return IdentityEvent(
        source="audit",
        event_id=_s(ev["auditID"], 64),
        at=at,
        user=_s(user.get("username")),
        groups=_strings(user.get("groups")),
        impersonated=_s(imp.get("username")),
        verb=verb,
        group=_s(ref.get("apiGroup")),
        resource=_s(ref.get("resource")),
        namespace=_s(ref.get("namespace")),
        name=_s(ref.get("name")),
        uid=_s(ref.get("uid"), 64),
        resource_version=_s(ref.get("resourceVersion"), 64),
        subresource=_s(ref.get("subresource")),
        field_manager=_s((query.get("fieldManager") or [""])[0], 128) or _manager_from_agent(agent),
        user_agent=agent,
        source_ips=_strings(ev.get("sourceIPs")),
        stage=_s(ev.get("stage")) or "ResponseComplete",
        received_at=parse_time(ev.get("requestReceivedTimestamp")),
    )


def from_admission(request: Mapping[str, Any], *, now: float | None = None) -> IdentityEvent | None:
    """The write an AdmissionReview's ``request`` describes, or None for a dry run. Bodies are not kept."""
    op = request.get("operation")
    if not isinstance(op, str):
        raise ValueError("`request.operation` is required")
    if request.get("dryRun") is True:
        return None
    user = _obj(request.get("userInfo"))
    kind = _obj(request.get("kind"))
    res = _obj(request.get("resource"))
    options = _obj(request.get("options"))
    # DELETE carries only the old object
    meta = _obj(_obj(request.get("object")).get("metadata")) or _obj(
        _obj(request.get("oldObject")).get("metadata")
    )
    sub = _s(request.get("subResource"))
    # a subresource's review (kubectl scale: kind autoscaling/v1 Scale, resource apps/v1 deployments,
    # subResource scale) names the object by its resource; its kind is the subresource's, so the
    # record keeps the resource's group and no kind, as an audit Event's objectRef does
    # (k8s.io/api admission/v1 types.go: AdmissionRequest.Kind / Resource / SubResource)
    group = _s(res.get("group")) if sub else _s(kind.get("group")) or _s(res.get("group"))
    return IdentityEvent(
        source="admission",
        event_id=_s(request.get("uid"), 64),
        at=_time.time() if now is None else now,
        user=_s(user.get("username")),
        groups=_strings(user.get("groups")),
        verb=op.lower(),
        group=group,
        resource=_s(res.get("resource")),
        kind="" if sub else _s(kind.get("kind")),
        namespace=_s(request.get("namespace")) or _s(meta.get("namespace")),
        name=_s(request.get("name")) or _s(meta.get("name")),
        uid=_s(meta.get("uid"), 64),
        resource_version=_s(meta.get("resourceVersion"), 64),
        subresource=sub,
        field_manager=_s(options.get("fieldManager"), 128),
        stage="admission",
    )


def _same_object(ev: IdentityEvent, group: str, kind: str, namespace: str, name: str, uid: str) -> bool:
    if uid and ev.uid:
        return ev.uid == uid
    if (ev.group, ev.namespace, ev.name) != (group, namespace, name):
        return False
    if ev.kind:
        return ev.kind == kind
    return ev.resource == guess_resource(kind)


def best_match(
    events: Iterable[IdentityEvent],
    *,
    group: str,
    kind: str,
    namespace: str,
    name: str,
    uid: str,
    resource_version: str,
    manager: str,
    time: float | None,
    window: float = JOIN_WINDOW,
) -> IdentityEvent | None:
    """The event that made this managedFields entry, by the rule in the module docstring; None when none."""
    best: tuple[int, int, float, float, IdentityEvent] | None = None
    for ev in events:
        if not ev.user or ev.verb == "delete" or ev.subresource == "status":
            continue
        if not _same_object(ev, group, kind, namespace, name, uid):
            continue
        if ev.field_manager and ev.field_manager != manager:
            continue
        source = 0 if ev.source == "audit" else 1
        exact = bool(resource_version) and ev.resource_version == resource_version
        if exact:
            rank = (source, 0, 0.0, -ev.at)
        elif time is None:
            continue
        else:
            # managedFields times are whole seconds: the write happened in [time, time + 1)
            gap = max(0.0, time - ev.at, ev.at - (time + 1.0))
            if gap > window:
                continue
            rank = (source, 1, gap, -ev.at)
        if best is None or rank < best[:4]:
            best = (*rank, ev)
    return best[4] if best else None


_UNITS = {"en": ("s", "min", "h", "d"), "zh-CN": ("秒", "分钟", "小时", "天")}


def _ago(seconds: float, locale: str = "en") -> str:
    s = max(0, int(seconds))
    sec, mins, hours, days = _UNITS.get(locale, _UNITS["en"])
    n, unit = (
        (s, sec)
        if s < 60
        else (s // 60, mins)
        if s < 3600
        else (s // 3600, hours)
        if s < 86400
        else (s // 86400, days)
    )
    return f"{n} {unit}前" if locale == "zh-CN" else f"{n} {unit} ago"


def who(
    *,
    manager: str,
    time: str | float | None,
    user: str = "",
    matched: bool | None = None,
    now: float | None = None,
    locale: str = "en",
    tz: tzinfo | None = None,
) -> str:
    """``alice@example.com via kubectl-patch, 14:02:07 (3 min ago)``; without a person the manager only.

    ``matched`` False (the join ran, nothing matched) adds that no identity record matched. Times
    are in ``tz`` (default UTC); older than a day they carry the date. ``locale`` "zh-CN" writes
    it as a Chinese reader says it: ``由 alice@example.com 通过 kubectl-patch 修改，14:02:07（3 分钟前）``
    (the field manager is the tool, never the person); anything else is English.
    """
    now = _time.time() if now is None else now
    at = time if isinstance(time, float) else parse_time(time)
    zh = locale == "zh-CN"
    if zh:
        tool = f"通过 {manager} 修改" if manager else "修改（字段管理器未知）"
        head = f"由 {user} {tool}" if user else tool
    else:
        head = f"{user} via {manager}" if user else (manager or "unknown manager")
    if at is not None:
        stamp = datetime.fromtimestamp(at, tz or UTC)
        clock = stamp.strftime("%H:%M:%S") if now - at < 86400 else stamp.strftime("%Y-%m-%d %H:%M:%S")
        head += f"，{clock}（{_ago(now - at, locale)}）" if zh else f", {clock} ({_ago(now - at)})"
    if not user and matched is False:
        head += "；未匹配到身份记录" if zh else "; no identity record matched"
    return head


class IdentityStore(Protocol):
    """Where identity records live; the notifier needs only these three calls."""

    def add(self, events: Iterable[IdentityEvent]) -> int:
        """Store records (a resent one is ignored), prune to the bounds; how many were new."""
        ...

    def candidates(self, *, namespace: str, name: str, uid: str) -> list[IdentityEvent]:
        """Records about this object (by name or UID), newest first, within the retention."""
        ...

    def count(self) -> int: ...


def _live_meta(items: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str, str], tuple[str, str]]:
    """(group, kind, namespace, name) -> (uid, resourceVersion) of each live object in Argo CD's answer."""
    out: dict[tuple[str, str, str, str], tuple[str, str]] = {}
    for item in items:
        live = item.get("liveState")
        if isinstance(live, str):
            try:
                live = json.loads(live)
            except ValueError:
                live = None
        meta = live.get("metadata") if isinstance(live, dict) else None
        if not isinstance(meta, dict):
            continue
        key = (
            str(item.get("group") or ""),
            str(item.get("kind") or ""),
            str(item.get("namespace") or ""),
            str(item.get("name") or ""),
        )
        out[key] = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
    return out


def attribute(report: DriftReport, items: Iterable[Mapping[str, Any]], store: IdentityStore) -> int:
    """The join hook: give each human change's actor the person whose record matches (driftguard/identity.py).

    A human change with a managedFields actor and no matching record keeps the field manager and is
    marked ``matched=False``, so the alert can say that no identity record matched. Returns how many
    changes got a person.
    """
    live = _live_meta(items)
    found = 0
    cache: dict[tuple[str, str, str], list[IdentityEvent]] = {}
    for rd in report.resources:
        changed = False
        out = []
        for c in rd.changes:
            if c.cls != HUMAN or c.actor is None:
                out.append(c)
                continue
            k = c.resource
            uid, rv = live.get((k.group, k.kind, k.namespace, k.name), ("", ""))
            ck = (k.namespace, k.name, uid)
            if ck not in cache:
                cache[ck] = store.candidates(namespace=k.namespace, name=k.name, uid=uid)
            ev = best_match(
                cache[ck],
                group=k.group,
                kind=k.kind,
                namespace=k.namespace,
                name=k.name,
                uid=uid,
                resource_version=rv,
                manager=c.actor.manager,
                time=parse_time(c.actor.time),
            )
            if ev is None:
                actor = replace(c.actor, matched=False)
            else:
                found += 1
                actor = replace(c.actor, user=ev.user, source=ev.source, matched=True)
            out.append(replace(c, actor=actor))
            changed = True
        if changed:
            rd.changes = out
    return found

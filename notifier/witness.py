"""The admission witness: the field-level diff of a write to an object Argo CD tracks, kept a while.

Self-heal can put a human change back before the notifier reads the app: the first self-heal has
no backoff (argo-cd v3.5.1 controller/appcontroller.go, ``selfHealRemainingBackoff`` is zero on the
first attempt) and the managed resources come from the controller's cache, so the read shows the
healed object and the change is gone. The observe-only admission webhook saw the write itself
(``oldObject`` and ``object``): for objects Argo CD tracks, this module computes the diff there
(driftguard/diff.py), masks it as alerts are masked (driftguard/redact.py) and stores it, bounded,
beside the identity record (same retention; ``MAX_ROWS``, ``MAX_CHANGES`` per write, short values).
The worker reads it back when the live read no longer shows a change the webhook body said was
there (notifier/alerts/reverted.py).

Argo CD tracks an object by the label ``app.kubernetes.io/instance`` (the default ``label``
tracking) or the annotation ``argocd.argoproj.io/tracking-id`` (``annotation`` and
``annotation+label``): argo-cd v3.5.1 util/argo/resource_tracking.go, common/common.go.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from driftguard.diff import ListSeg, Segment, diff_objects
from driftguard.drift import ARGOCD_MANAGERS, DEFAULT_CONTROLLERS
from driftguard.redact import Redactor
from notifier.outbox.store import Store

__all__ = [
    "MAX_CHANGES",
    "MAX_ROWS",
    "TRACKING_ANNOTATION",
    "TRACKING_LABEL",
    "WitnessStore",
    "Witnessed",
    "capture",
    "segments_of",
    "tracked",
]

TRACKING_LABEL = "app.kubernetes.io/instance"
TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
MAX_CHANGES = 50
"""Most field changes kept per write (a rewrite of a whole object is summarised by its first ones)."""
MAX_VALUE = 300
"""Characters kept of each old/new value (as JSON)."""
MAX_ROWS = 20_000
"""Most writes kept; the oldest go first (the identity retention bounds them in time)."""
_NOISE_META = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_ARGO_USER_SUFFIX = ":argocd-application-controller"


@dataclass(frozen=True)
class Witnessed:
    """One write's field changes as admission saw them (values masked and shortened)."""

    event_id: str
    at: float
    group: str
    kind: str
    namespace: str
    name: str
    uid: str
    user: str
    field_manager: str
    changes: tuple[dict[str, Any], ...]
    """``{"path", "op", "old", "new"}`` each, JSON-pointer paths, old and new as the write changed them."""


def tracked(obj: Any) -> str:
    """The Argo CD tracking of an object (annotation first, then the label), "" when untracked."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return ""
    annotations = meta.get("annotations")
    labels = meta.get("labels")
    ann = annotations.get(TRACKING_ANNOTATION) if isinstance(annotations, Mapping) else None
    lab = labels.get(TRACKING_LABEL) if isinstance(labels, Mapping) else None
    return str(ann or lab or "")[:300]


def _comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without what every write changes (status, bookkeeping metadata)."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = dict(out.get("metadata") or {})
    for key in _NOISE_META:
        meta.pop(key, None)
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and _LAST_APPLIED in annotations:
        meta["annotations"] = {k: v for k, v in annotations.items() if k != _LAST_APPLIED}
    out["metadata"] = meta
    return out


def _short(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def _segment(seg: Segment) -> Any:
    """A path segment as JSON: a map key as it is, a list item as its index and merge key (so the
    alert names ``containers[server]``, as it does for a live diff)."""
    if isinstance(seg, ListSeg):
        key = [
            [str(f)[:100], v if isinstance(v, int | float | bool) else str(v)[:200]] for f, v in seg.key or ()
        ]
        return {"i": seg.index, "k": key or None}
    return str(seg)


def segments_of(raw: Any) -> tuple[Segment, ...]:
    """The segments :func:`_segment` wrote, read back (anything else: no segments, the path's indexes)."""
    if not isinstance(raw, list):
        return ()
    out: list[Segment] = []
    for item in raw:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get("i"), int):
            key = item.get("k")
            pairs = (
                tuple((str(f), v) for f, v in key)
                if isinstance(key, list) and all(isinstance(x, list) and len(x) == 2 for x in key)
                else None
            )
            out.append(ListSeg(item["i"], pairs or None, None))
        else:
            return ()
    return tuple(out)


def _by_argocd_or_controller(user: str, manager: str) -> bool:
    # Argo CD's own writes (the self-heal itself) and controllers' runtime writes are no human change
    return (
        user.endswith(_ARGO_USER_SUFFIX)
        or manager in ARGOCD_MANAGERS
        or manager in DEFAULT_CONTROLLERS
        or user.startswith("system:serviceaccount:kube-system:")
        or user.startswith("system:kube-")
    )


def capture(request: Mapping[str, Any], *, redactor: Redactor, now: float | None = None) -> Witnessed | None:
    """The masked field diff of an UPDATE to a tracked object by a person, or None."""
    if request.get("operation") != "UPDATE" or request.get("dryRun") is True:
        return None
    old, new = request.get("oldObject"), request.get("object")
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return None
    if not (tracked(new) or tracked(old)):
        return None
    user_info = request.get("userInfo")
    user = str((user_info or {}).get("username") or "")[:253] if isinstance(user_info, Mapping) else ""
    options = request.get("options")
    manager = str((options or {}).get("fieldManager") or "")[:128] if isinstance(options, Mapping) else ""
    if not user or _by_argocd_or_controller(user, manager):
        return None
    kind_obj = request.get("kind") if isinstance(request.get("kind"), Mapping) else {}
    assert isinstance(kind_obj, Mapping)
    kind = str(new.get("kind") or kind_obj.get("kind") or "")[:128]
    group = str(kind_obj.get("group") or "")[:253]
    if request.get("subResource"):
        return None  # a scale or status review's objects are the subresource's, not the resource's
    changes = diff_objects(_comparable(old), _comparable(new))
    if not changes:
        return None
    kept = []
    for c in changes[:MAX_CHANGES]:
        masked = redactor.change(c, kind=kind, group=group)
        kept.append(
            {
                "path": masked.path,
                "op": masked.op,
                "old": _short(masked.old),
                "new": _short(masked.new),
                "segments": [_segment(seg) for seg in c.segments],
            }
        )
    meta = new.get("metadata") or {}
    return Witnessed(
        event_id=str(request.get("uid") or "")[:64],
        at=time.time() if now is None else now,
        group=group,
        kind=kind,
        namespace=str(request.get("namespace") or meta.get("namespace") or "")[:253],
        name=str(request.get("name") or meta.get("name") or "")[:253],
        uid=str(meta.get("uid") or "")[:64],
        user=user,
        field_manager=manager,
        changes=tuple(kept),
    )


_COLUMNS = 'event_id, at, api_group, kind, namespace, name, uid, "user", field_manager, changes'


class WitnessStore:
    """``admission_changes`` in the outbox's store (SQLite or PostgreSQL), shared by the replicas."""

    def __init__(self, outbox: Store, *, retention: float = 86400.0, max_rows: int = MAX_ROWS) -> None:
        self.outbox = outbox
        self.retention = retention
        self.max_rows = max_rows
        self._pruned_at = 0.0

    def add(self, w: Witnessed) -> None:
        """Store one write (a resent review is stored once); raises the driver's error when it cannot."""
        ox = self.outbox
        row = (
            w.event_id,
            w.at,
            w.group,
            w.kind,
            w.namespace,
            w.name,
            w.uid,
            w.user,
            w.field_manager,
            json.dumps(list(w.changes), default=str),
        )
        with ox.transaction() as tx:
            tx.execute(
                f"INSERT INTO admission_changes({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)"  # noqa: S608 - fixed text
                " ON CONFLICT(event_id) DO NOTHING",
                row,
            )
        if w.at - self._pruned_at >= 1.0:
            with contextlib.suppress(*ox.errors):
                self.prune(w.at)

    def prune(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self._pruned_at = now
        with self.outbox.transaction() as tx:
            tx.execute("DELETE FROM admission_changes WHERE at<?", (now - self.retention,))
            n = int(tx.execute("SELECT count(*) AS n FROM admission_changes").fetchone()["n"])
            if n > self.max_rows:
                tx.execute(
                    "DELETE FROM admission_changes WHERE event_id IN"
                    " (SELECT event_id FROM admission_changes ORDER BY at LIMIT ?)",
                    (n - self.max_rows,),
                )

    def between(self, *, namespace: str, name: str, kind: str, since: float, until: float) -> list[Witnessed]:
        """The witnessed writes to one object in [since, until], oldest first."""
        rows = self.outbox.read(
            f"SELECT {_COLUMNS} FROM admission_changes WHERE namespace=? AND name=? AND kind=?"  # noqa: S608
            " AND at>=? AND at<=? ORDER BY at LIMIT 100",
            (namespace, name, kind, since, until),
        )
        return [
            Witnessed(
                event_id=r["event_id"],
                at=float(r["at"]),
                group=r["api_group"],
                kind=r["kind"],
                namespace=r["namespace"],
                name=r["name"],
                uid=r["uid"],
                user=r["user"],
                field_manager=r["field_manager"],
                changes=tuple(json.loads(r["changes"])),
            )
            for r in rows
        ]

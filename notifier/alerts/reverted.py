"""The drift self-heal reverted before the notifier read the app: told, not lost.

notifications-engine renders the webhook body when the trigger's condition holds (the app is
OutOfSync), and the notifier reads the app again afterwards. Self-heal may have put the object
back in between (argo-cd v3.5.1 controller/appcontroller.go: the first self-heal attempt has no
backoff; the managed resources come from the controller's cache). Then the read shows the resource
as Git has it and the drift engine finds nothing. This module tells that case apart and says what
happened:

- the body named a resource OutOfSync (``status.resources[].status``; not one only to prune) and
  the live read shows no change at all on it (not even one the engine does not alert on: an HPA's
  replicas keep the resource in the report, so nothing is said about it);
- with the admission witness (notifier/witness.py): the people's writes to that resource after
  the operation the body shows (``operationState.finishedAt``) and up to the read: their field
  changes, who, and when the change was reverted;
- without a witnessed write: only when Argo CD's answer shows an operation newer than the body's,
  at the same revision (a sync of the same Git state, not a deploy of a new one), that re-applied
  the resource (``operationState.syncResult.resources``): the resources are named and the alert
  says the field diff was not captured and how to capture it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from driftguard.diff import FieldChange
from driftguard.drift import HUMAN, Actor, Classified, ResourceDrift
from driftguard.manifests import ResourceKey
from driftguard.report import DriftReport
from notifier.witness import WitnessStore, segments_of

__all__ = ["LOOKBACK", "Reverted", "reverted"]

LOOKBACK = 900.0
"""How far back a write is looked for when the body shows no earlier operation to start from."""


@dataclass
class Reverted:
    """What the read no longer shows: a report of witnessed changes, or the resources alone."""

    report: DriftReport
    """The witnessed changes as human changes (empty resources: none witnessed)."""
    resources: list[ResourceKey]
    """The resources the body named OutOfSync and the read shows as Git has them."""
    at: str
    """When they were put back (the newer operation's finishedAt, else the read), ISO 8601 UTC."""
    by: str
    """``self-heal`` (an automated operation), ``sync`` (a person's or CI's), or "" (unknown)."""
    witnessed: bool


def _dig(obj: Any, *path: str) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _key(r: Mapping[str, Any]) -> ResourceKey:
    return ResourceKey(
        str(r.get("group") or ""),
        str(r.get("kind") or ""),
        str(r.get("namespace") or ""),
        str(r.get("name") or ""),
    )


def _epoch(raw: Any) -> float | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def reverted(
    body: Mapping[str, Any],
    app: Mapping[str, Any],
    report: DriftReport,
    *,
    witnesses: WitnessStore | None,
    now: float,
) -> Reverted | None:
    """The reverted drift behind an OutOfSync body the read no longer shows, or None."""
    hinted = _dig(body, "app", "status")
    if not isinstance(hinted, Mapping) or _dig(hinted, "sync", "status") != "OutOfSync":
        return None
    # a resource the read still shows a person's change, a missing object or a prune on is not reverted;
    # what the engine does not alert on (an HPA's replicas, defaults, ignored fields) stays either way
    still = {r.key for r in report.resources if r.alerting}
    named = [
        _key(r)
        for r in _items(hinted.get("resources"))
        if r.get("status") == "OutOfSync" and r.get("requiresPruning") is not True and r.get("kind")
    ]
    gone = [k for k in dict.fromkeys(named) if k not in still]
    if not gone:
        return None
    body_op = hinted.get("operationState") if isinstance(hinted.get("operationState"), Mapping) else {}
    assert isinstance(body_op, Mapping)
    live_op = _dig(app, "status", "operationState") or {}
    newer = bool(live_op) and (
        live_op.get("startedAt") != body_op.get("startedAt") and live_op.get("startedAt") is not None
    )
    same_revision = _dig(live_op, "syncResult", "revision") in (
        None,
        "",
        _dig(hinted, "sync", "revision"),
    ) or (_dig(live_op, "operation", "sync", "revision") == _dig(hinted, "sync", "revision"))
    healed_at = _epoch(live_op.get("finishedAt")) if newer else None
    by = ""
    if newer:
        by = "self-heal" if _dig(live_op, "operation", "initiatedBy", "automated") is True else "sync"
    since = _epoch(body_op.get("finishedAt")) or (now - LOOKBACK)
    until = now
    resources: list[ResourceDrift] = []
    if witnesses is not None:
        for key in gone:
            writes = witnesses.between(
                namespace=key.namespace, name=key.name, kind=key.kind, since=since, until=until
            )
            changes: dict[str, Classified] = {}
            for w in writes:  # oldest first: a later write to the same path wins
                actor = Actor(
                    w.field_manager, "Update", _iso(w.at), user=w.user, source="admission", matched=True
                )
                for c in w.changes:
                    change = FieldChange(
                        str(c.get("path") or ""),
                        str(c.get("op") or ""),
                        c.get("old"),
                        c.get("new"),
                        segments=segments_of(c.get("segments")),
                    )
                    changes[change.path] = Classified(key, change, HUMAN, actor, "witnessed at admission")
            if changes:
                resources.append(ResourceDrift(key, "modified", list(changes.values())))
    if not resources and not (newer and same_revision and by):
        return None  # no evidence of a revert: a deploy of new Git, or a read that raced the other way
    if not resources:
        # re-applied by that operation: gitops-engine reports kubectl's "<kind>/<name> configured"
        # (pkg/sync/sync_context.go); an "unchanged" resource was not what the operation put back
        applied = {
            _key(r)
            for r in _items(_dig(live_op, "syncResult", "resources"))
            if "unchanged" not in str(r.get("message") or "") and r.get("status") in (None, "Synced")
        }
        gone = [k for k in gone if k in applied]
        if not gone:
            return None
    report_ = DriftReport(report.app, resources, report.cause)
    return Reverted(
        report=report_,
        resources=[r.key for r in resources] or gone,
        at=_iso(healed_at if healed_at is not None else now),
        by=by,
        witnessed=bool(resources),
    )

"""The drift journal: every drift episode from the change to the heal, kept after Argo CD has forgotten it.

An episode opens when a notification's report has alerting changes and the app has no open
episode; more drift during it is added to it. It records the app, the changes (values masked
exactly as the alerts show them), their classes, who (the person, else the field manager), when
the change was made (identity or managedFields time), when the notification arrived, when each
channel took the alert, and when the app was back in sync (by self-heal or a sync). Durations
are derived from those times when read.

Its own table, ``drift_journal``, in the outbox's store (the SQLite file, or the PostgreSQL
database every replica shares: schema version 3 of notifier/outbox/store.py ``MIGRATIONS``). The SQL
is written once; the outbox backend supplies transactions, placeholders and row locks. Several
replicas write one app's episode: a unique index allows one open episode per app (two replicas
opening it at once store it once), each read-modify-write locks the row (PostgreSQL
``SELECT ... FOR UPDATE``; SQLite's one writer), and healing is one ``UPDATE ... WHERE healed_at IS
NULL``, so exactly one replica heals an episode. :class:`Journal` is the interface.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections import Counter
from typing import Any, Protocol

from driftguard.drift import HUMAN
from driftguard.identity import parse_time, who
from driftguard.report import DriftReport
from notifier.outbox.store import Store, Tx

__all__ = ["Journal", "OutboxJournal", "episode_view", "summary"]

MAX_CHANGES = 200
"""Changes kept per episode (the alerts show fewer)."""


class Journal(Protocol):
    """Where episodes live; the worker writes three events, the API and the page read."""

    def drift(self, report: DriftReport, *, notified_at: float) -> str: ...

    def alerted(self, app: str, channel: str, *, at: float) -> None: ...

    def healed(self, app: str, *, at: float, by: str) -> bool: ...

    def episodes(
        self, *, app: str = "", who: str = "", since: float = 0.0, limit: int = 500
    ) -> list[dict[str, Any]]: ...


def _value(v: Any) -> Any:
    text = v if isinstance(v, str) or v is None else json.dumps(v, sort_keys=True, default=str)
    return text if text is None or len(text) <= 200 else text[:199] + "…"


class OutboxJournal:
    """:class:`Journal` in the outbox's store (SQLite or PostgreSQL)."""

    def __init__(self, outbox: Store) -> None:
        self.outbox = outbox

    def drift(self, report: DriftReport, *, notified_at: float) -> str:
        """Open the app's episode (or add to the open one); its id."""
        alerting = report.alerting
        changes, times = [], []
        person = manager = ""
        for c in alerting[:MAX_CHANGES]:
            a = c.actor
            at = parse_time(a.time) if a else None
            if at is not None:
                times.append(at)
            if a and c.cls == HUMAN and not person:
                person, manager = a.user, a.manager
            elif a and not manager:
                manager = a.manager
            changes.append(
                {
                    "resource": str(c.resource),
                    "kind": c.resource.kind,
                    "namespace": c.resource.namespace,
                    "name": c.resource.name,
                    "path": c.change.path,
                    "old": _value(c.change.old),
                    "new": _value(c.change.new),
                    "class": c.cls,
                    "user": a.user if a else "",
                    "manager": a.manager if a else "",
                    "time": a.time if a else None,
                }
            )
        changed_at = min(times) if times else notified_at
        classes = sorted({c.cls for c in alerting})
        with self.outbox.transaction() as tx:
            row = self._open(tx, report.app.key)
            if row is None:
                eid = uuid.uuid4().hex
                won = tx.execute(
                    "INSERT INTO drift_journal(id, app, app_name, app_namespace, classes, severity, who, who_user,"
                    " who_manager, changes, changed_at, notified_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
                    " ON CONFLICT (app) WHERE healed_at IS NULL DO NOTHING",
                    (
                        eid,
                        report.app.key,
                        report.app.name,
                        report.app.namespace,
                        json.dumps(classes),
                        report.severity,
                        person or manager or "unknown",
                        person,
                        manager,
                        json.dumps(changes),
                        min(changed_at, notified_at),
                        notified_at,
                        time.time(),
                    ),
                ).rowcount
                if won:
                    return eid
                # another replica opened it meanwhile: add to theirs (healed in between as well, which
                # needs a sync inside these milliseconds: fail, and the notification's retry opens anew)
                row = self._open(tx, report.app.key)
                if row is None:
                    raise RuntimeError("the app's open drift episode was healed while this one was added")
            known = json.loads(row["changes"])
            seen = {(k["resource"], k["path"]) for k in known}
            merged = known + [k for k in changes if (k["resource"], k["path"]) not in seen]
            # an identity record that arrived after the first alert (an audit batch is up to
            # --audit-webhook-batch-max-wait late) names the person at the next re-check
            named = not row["who_user"] and person
            tx.execute(
                "UPDATE drift_journal SET changes=?, classes=?, changed_at=?, updated_at=?, who=?, who_user=? WHERE id=?",
                (
                    json.dumps(merged[:MAX_CHANGES]),
                    json.dumps(sorted(set(json.loads(row["classes"])) | set(classes))),
                    min(float(row["changed_at"]), changed_at),
                    time.time(),
                    person if named else row["who"],
                    person if named else row["who_user"],
                    row["id"],
                ),
            )
            return str(row["id"])

    def _open(self, tx: Tx, app: str) -> dict[str, Any] | None:
        """The app's open episode, locked for this transaction."""
        row = tx.execute(
            "SELECT id, changes, classes, changed_at, who, who_user FROM drift_journal"  # noqa: S608 - fixed text
            " WHERE app=? AND healed_at IS NULL" + tx.row_lock,
            (app,),
        ).fetchone()
        return dict(row) if row is not None else None

    def alerted(self, app: str, channel: str, *, at: float) -> None:
        """A channel took the alert: the first time per channel counts."""
        with self.outbox.transaction() as tx:
            row = tx.execute(
                "SELECT id, alerted FROM drift_journal WHERE app=? ORDER BY changed_at DESC LIMIT 1"  # noqa: S608
                + tx.row_lock,
                (app,),
            ).fetchone()
            if row is None:
                return
            alerted = json.loads(row["alerted"])
            if channel not in alerted:
                alerted[channel] = at
                tx.execute(
                    "UPDATE drift_journal SET alerted=?, updated_at=? WHERE id=?",
                    (json.dumps(alerted), time.time(), row["id"]),
                )

    def healed(self, app: str, *, at: float, by: str) -> bool:
        """The app matches Git again: close its open episode; True for the one caller that closed it."""
        with self.outbox.transaction() as tx:
            cur = tx.execute(
                "UPDATE drift_journal SET healed_at=CASE WHEN changed_at>? THEN changed_at ELSE ? END, healed_by=?,"
                " updated_at=? WHERE app=? AND healed_at IS NULL",
                (at, at, by, time.time(), app),
            )
        return bool(cur.rowcount > 0)

    def episodes(
        self, *, app: str = "", who: str = "", since: float = 0.0, limit: int = 500
    ) -> list[dict[str, Any]]:
        """Episodes, newest first; ``app`` matches the name or namespace/name, ``who`` the person or manager."""
        where: list[str] = ["changed_at>=?"]
        args: list[Any] = [since]
        if app:
            where.append("(app=? OR app_name=?)")
            args += [app, app]
        if who:
            where.append("(who_user=? OR who_manager=? OR who=?)")
            args += [who, who, who]
        rows = self.outbox.read(
            f"SELECT * FROM drift_journal WHERE {' AND '.join(where)} ORDER BY changed_at DESC LIMIT ?",  # noqa: S608
            (*args, max(1, min(limit, 5000))),
        )
        return [episode_view(r) for r in rows]


def _ms(a: float | None, b: float | None) -> int | None:
    return None if a is None or b is None else max(0, round((b - a) * 1000))


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1000):03d}Z"


def episode_view(r: dict[str, Any]) -> dict[str, Any]:
    """One episode as the API answers it: times in RFC 3339 and epoch seconds, durations in ms."""
    alerted: dict[str, float] = json.loads(r["alerted"])
    first_alert = min(alerted.values()) if alerted else None
    changed, notified, healed = r["changed_at"], r["notified_at"], r["healed_at"]
    return {
        "id": r["id"],
        "app": r["app"],
        "app_name": r["app_name"],
        "app_namespace": r["app_namespace"],
        "classes": json.loads(r["classes"]),
        "severity": r["severity"],
        "who": r["who"],
        "user": r["who_user"],
        "field_manager": r["who_manager"],
        "actor": who(manager=r["who_manager"], time=changed, user=r["who_user"]),
        "changes": json.loads(r["changes"]),
        "changed_at": _iso(changed),
        "notified_at": _iso(notified),
        "alerted_at": {ch: _iso(t) for ch, t in sorted(alerted.items())},
        "healed_at": _iso(healed),
        "healed_by": r["healed_by"],
        "open": healed is None,
        "times": {"changed": changed, "notified": notified, "alerted": alerted, "healed": healed},
        "durations_ms": {
            "to_notify": _ms(changed, notified),
            "to_alert": _ms(changed, first_alert),
            "to_alert_by_channel": {ch: _ms(changed, t) for ch, t in sorted(alerted.items())},
            "to_heal": _ms(changed, healed),
            "alert_to_heal": _ms(first_alert, healed),
        },
    }


def summary(episodes: list[dict[str, Any]], *, top: int = 5) -> dict[str, Any]:
    """Top people, top drifted fields, and the median times to alert and to heal (ms) of these episodes."""
    people = Counter(e["who"] for e in episodes)
    fields = Counter(f"{c['kind']} {c['path'] or '(whole object)'}" for e in episodes for c in e["changes"])
    to_alert = [e["durations_ms"]["to_alert"] for e in episodes if e["durations_ms"]["to_alert"] is not None]
    to_heal = [e["durations_ms"]["to_heal"] for e in episodes if e["durations_ms"]["to_heal"] is not None]
    return {
        "episodes": len(episodes),
        "top_people": [{"who": w, "episodes": n} for w, n in people.most_common(top)],
        "top_fields": [{"field": f, "episodes": n} for f, n in fields.most_common(top)],
        "median_to_alert_ms": round(statistics.median(to_alert)) if to_alert else None,
        "median_to_heal_ms": round(statistics.median(to_heal)) if to_heal else None,
    }

"""What one expansion queues: the alerts, resolves and notices for a report, per routed channel.

The worker (notifier/alerts/worker.py) calls ``Planner.plan`` inside the expansion's one
transaction: route, dedup per episode and fingerprint, resolve once, the trigger's notice, the
drift put back before the read (notifier/alerts/reverted.py), and for channels that keep one
incident per kind (``per_incident``: PagerDuty) one alert per incident kind, each resolved on its
own condition.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from driftguard.drift import HUMAN, PRUNE_CANDIDATE
from driftguard.manifests import ResourceKey
from driftguard.report import AppInfo, DriftReport
from notifier.alerts.notices import NOTICE_TRIGGERS, notice_for
from notifier.alerts.reverted import Reverted, reverted
from notifier.channels import ALERT, INCIDENTS, NOTICE, RESOLVE, Channel, incident_of
from notifier.config import ROUTABLE, NotifierConfig
from notifier.journal import Journal
from notifier.metrics import NotifierMetrics
from notifier.outbox import Outbox
from notifier.render import notice_view, view
from notifier.witness import WitnessStore

__all__ = ["Planner", "message"]


class Planner:
    """Plans the messages of one expansion; writes episodes, incidents and the journal as it goes."""

    def __init__(
        self,
        outbox: Outbox,
        channels: dict[str, Channel],
        config: NotifierConfig,
        metrics: NotifierMetrics,
        *,
        dedup_window: float,
        journal: Journal | None = None,
        witnesses: WitnessStore | None = None,
    ) -> None:
        self.outbox = outbox
        self.channels = channels
        self.config = config
        self.metrics = metrics
        self.dedup_window = dedup_window
        self.journal = journal
        self.witnesses = witnesses
        self.per_incident = any(ch.per_incident for ch in channels.values())
        """A channel keeps one incident per kind (PagerDuty): incidents are opened and resolved per kind."""

    def plan(
        self,
        app: dict[str, Any],
        report: DriftReport,
        trigger: str,
        row: dict[str, Any],
        *,
        received_at: float,
    ) -> tuple[list[dict[str, Any]], str]:
        body = json.loads(row["body"]) if row.get("body") else {}
        # PagerDuty: each kind of incident resolves on its own condition, whatever the trigger
        out = self._resolve_incidents(app, report, received_at=received_at)
        if trigger in NOTICE_TRIGGERS and NOTICE_TRIGGERS[trigger] != "prune-pending":
            return out + self._plan_notice(app, report, trigger, body, received_at=received_at), "notice"
        planned, outcome = self._plan_drift(app, report, trigger, body, received_at=received_at)
        if outcome == "quiet" and trigger in NOTICE_TRIGGERS:
            # prunes pending that the drift engine does not show (Argo CD's status lists them): the notice
            notice = self._plan_notice(app, report, trigger, body, received_at=received_at)
            return out + notice, ("notice" if notice else "quiet")
        return out + planned, outcome

    def _plan_drift(
        self,
        app: dict[str, Any],
        report: DriftReport,
        trigger: str,
        body: dict[str, Any],
        *,
        received_at: float,
    ) -> tuple[list[dict[str, Any]], str]:
        """The drift path (drift detected or resolved, re-checks, prunes pending): one alert per episode and drift.

        on-prune-pending comes here too: a Git removal with prune off makes Argo CD fire it with
        on-drift-detected, and both expansions read the same prune candidates, so the second is the
        same episode and fingerprint and adds no message (one message per channel).
        """
        app_key = report.app.key
        if report.app.sync_status == "OutOfSync":
            self.outbox.open_episode(app_key, name=report.app.name, namespace=report.app.namespace)
        elif report.app.sync_status == "Synced":
            self.outbox.close_episode(app_key)
        alerting = report.alerting
        link = self.link(report.app)
        out: list[dict[str, Any]] = []
        if alerting:
            fingerprint = report.fingerprint()
            out = self._alert(report, view(report, link=link), fingerprint, received_at=received_at)
            self.outbox.open_incident(
                app_key, name=report.app.name, namespace=report.app.namespace, fingerprint=fingerprint
            )
            for kind in _alert_incidents(report):
                self._open(report, kind)
            if self.journal is not None:
                self.journal.drift(report, notified_at=received_at)
            return out, "alert"
        if trigger == "on-drift-detected":
            gone = reverted(body, app, report, witnesses=self.witnesses, now=time.time())
            if gone is not None:
                return self._plan_reverted(report, gone, received_at=received_at), "reverted"
        if self.journal is not None and report.app.sync_status == "Synced":
            self.journal.healed(app_key, at=received_at, by=_healed_by(app))  # no-op without an open episode
        # Resolve once whichever replica sees the sync: closing the incident is atomic (one caller
        # deletes the row). PagerDuty's resolves come from _resolve_incidents (one per kind).
        if self.outbox.incident(app_key) is None:
            return out, "quiet"  # a read, not a write, for the usual quiet expansion
        was_open = self.outbox.close_incident(app_key)
        if not was_open or not self.outbox.claim_resolve(app_key, self.dedup_window):
            return out, "quiet"
        for channel in self.config.targets(report, set(ROUTABLE)):
            ch = self.channels[channel]
            if ch.per_incident:
                continue
            payload = ch.payload(view(report, link=link, kind=RESOLVE), kind=RESOLVE)
            out.append(message(channel, RESOLVE, app_key, "resolve", payload, received_at))
        return out, ("resolve" if out else "quiet")

    def _alert(
        self, report: DriftReport, v: dict[str, Any], fingerprint: str, *, received_at: float
    ) -> list[dict[str, Any]]:
        """One alert per routed channel not yet told of this drift in this episode; PagerDuty one per incident kind."""
        app_key = report.app.key
        targets = self.config.targets(report, {c.cls for c in report.alerting})
        # once per episode and drift, not per time window (issue 30): a standing drift is not
        # re-sent at every re-check; DRIFTGUARD_NOTIFIER_DEDUP_WINDOW=0 turns this off
        repeats = (
            self.outbox.sent_in_episode(app_key, list(targets), fingerprint)
            if self.dedup_window
            else self.outbox.sent_recently(app_key, list(targets), fingerprint, 0.0)
        )
        out: list[dict[str, Any]] = []
        for channel, severity in targets.items():
            if channel in repeats:
                self.metrics.deduplicated(channel)
                continue
            ch = self.channels[channel]
            kinds = _alert_incidents(report) if ch.per_incident else [""]
            for kind in kinds:
                payload = ch.payload({**v, "severity": severity, "incident": kind or "drift"}, kind=ALERT)
                out.append(message(channel, ALERT, app_key, fingerprint, payload, received_at))
        return out

    def _plan_reverted(
        self, report: DriftReport, gone: Reverted, *, received_at: float
    ) -> list[dict[str, Any]]:
        """A drift self-heal (or a sync) put back before the read: the witnessed changes, or the resources named."""
        link = self.link(report.app)
        marker = {"at": gone.at, "by": gone.by, "witnessed": gone.witnessed}
        self._open(report, "drift")  # PagerDuty's drift incident resolves at the next expansion
        if gone.witnessed:
            v = {**view(gone.report, link=link), "reverted": marker}
            fingerprint = hashlib.sha256(
                json.dumps([gone.report.fingerprint(), "reverted", gone.at]).encode()
            ).hexdigest()[:32]
            return self._alert(gone.report, v, fingerprint, received_at=received_at)
        notice = notice_view(
            report.app,
            event="drift-reverted",
            lines=[_resource_line(k) for k in gone.resources],
            link=link,
            severity="error",
        )
        notice["reverted"] = marker
        notice["capture"] = "on" if self.witnesses is not None else "off"
        fingerprint = hashlib.sha256(json.dumps(["reverted", notice["lines"], gone.at]).encode()).hexdigest()[
            :32
        ]
        targets = self.config.targets(report, {HUMAN})
        return [
            message(
                channel,
                NOTICE,
                report.app.key,
                fingerprint,
                self.channels[channel].payload({**notice, "severity": severity}, kind=NOTICE),
                received_at,
            )
            for channel, severity in targets.items()
        ]

    def _open(self, report: DriftReport, kind: str) -> None:
        if self.per_incident:
            self.outbox.open_incident(
                f"{report.app.key}#{kind}",
                name=report.app.name,
                namespace=report.app.namespace,
                fingerprint=kind,
            )

    def _resolve_incidents(
        self, app: dict[str, Any], report: DriftReport, *, received_at: float
    ) -> list[dict[str, Any]]:
        """PagerDuty resolves for each open incident kind whose condition no longer holds in this read.

        drift: no alerting change but prune candidates (or none); prune: no prune candidate;
        sync: the last operation did not end in Error or Failed; render: no ComparisonError.
        """
        if not self.per_incident:
            return []
        holding = set(_alert_incidents(report))
        status = app.get("status") or {}
        if ((status.get("operationState") or {}).get("phase")) in ("Error", "Failed"):
            holding.add("sync")
        if any(
            isinstance(c, dict) and c.get("type") == "ComparisonError" for c in status.get("conditions") or []
        ):
            holding.add("render")
        out: list[dict[str, Any]] = []
        link = self.link(report.app)
        # one read for the usual case (nothing to resolve); a close only for what is open and gone
        gone = [f"{report.app.key}#{k}" for k in INCIDENTS if k not in holding]
        open_ = self.outbox.open_incidents(gone)
        for kind in INCIDENTS:
            key = f"{report.app.key}#{kind}"
            if key not in open_ or not self.outbox.close_incident(key):
                continue
            for channel in self.config.targets(report, set(ROUTABLE)):
                ch = self.channels[channel]
                if not ch.per_incident:
                    continue
                payload = ch.payload(
                    {**view(report, link=link, kind=RESOLVE), "incident": kind}, kind=RESOLVE
                )
                out.append(message(channel, RESOLVE, report.app.key, f"resolve-{kind}", payload, received_at))
        return out

    def _plan_notice(
        self,
        app: dict[str, Any],
        report: DriftReport,
        trigger: str,
        body: dict[str, Any],
        *,
        received_at: float,
    ) -> list[dict[str, Any]]:
        notice = notice_for(trigger, app, report.app, body=body, link=self.link(report.app))
        if notice is None:
            return []  # nothing to list: no notice ("would be deleted: -")
        classes = {PRUNE_CANDIDATE} if notice["event"] == "prune-pending" else set(ROUTABLE)
        fingerprint = hashlib.sha256(
            json.dumps(
                [trigger, notice["message"], notice["lines"], notice["counts"]], sort_keys=True
            ).encode()
        ).hexdigest()[:32]
        out: list[dict[str, Any]] = []
        targets = self.config.targets(report, classes, severity=notice["severity"])
        repeats = self.outbox.sent_recently(report.app.key, list(targets), fingerprint, self.dedup_window)
        for channel, severity in targets.items():
            if channel in repeats:
                self.metrics.deduplicated(channel)
                continue
            payload = self.channels[channel].payload({**notice, "severity": severity}, kind=NOTICE)
            out.append(message(channel, NOTICE, report.app.key, fingerprint, payload, received_at))
        if out:
            self._open(report, incident_of(notice))
        return out

    def link(self, app: AppInfo) -> str:
        base = self.config.argocd_url.rstrip("/")
        return f"{base}/applications/{app.namespace}/{app.name}" if base else ""


def _alert_incidents(report: DriftReport) -> list[str]:
    """The PagerDuty incident kinds a report's alerting changes open: drift (people, missing), prune."""
    classes = {c.cls for c in report.alerting}
    kinds = []
    if classes - {PRUNE_CANDIDATE}:
        kinds.append("drift")
    if PRUNE_CANDIDATE in classes:
        kinds.append("prune")
    return kinds


def _resource_line(key: ResourceKey) -> str:
    return f"{key.kind} {key.namespace + '/' if key.namespace else ''}{key.name}"


def _healed_by(app: dict[str, Any]) -> str:
    """``self-heal`` when Argo CD's last operation was automated, else ``sync`` (a person or a CI ran it)."""
    op = (app.get("status") or {}).get("operationState") or {}
    initiated = (op.get("operation") or {}).get("initiatedBy") or {}
    return "self-heal" if initiated.get("automated") else "sync"


def message(
    channel: str, kind: str, app: str, fingerprint: str, payload: dict[str, Any], received_at: float
) -> dict[str, Any]:
    return {
        "channel": channel,
        "kind": kind,
        "app": app,
        "fingerprint": fingerprint,
        "payload": payload,
        "received_at": received_at,
    }

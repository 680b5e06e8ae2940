"""The delivery worker: expand notifications, queue one message per channel, send with retries.

Runs as a thread in every gunicorn worker process; the outbox's leases keep them from taking the
same work. Each channel's messages are claimed and backed off independently (exponential backoff
with jitter, at least the receiver's Retry-After up to ``max_retry_after``), so a receiver that is
down, slow or rate limited delays only its own messages.

Nothing is retried forever and nothing is dropped silently: a notification whose expansion (Argo
CD, the drift engine) or rendering keeps failing is retried up to ``max_attempts`` or the
dead-letter window, then a plain fallback alert goes to every routed channel and it is
dead-lettered. Every failed attempt is counted (``failures_total{stage}``) and logged once.

Timeouts: a connection that cannot be made is retried (nothing was sent). A request that was sent
but not answered within the read timeout may have been taken; Feishu and Slack cannot tell us, and
a resend would post a second message, so it is recorded ``unconfirmed`` and not resent. PagerDuty
resends are harmless (same ``dedup_key``), so they are retried.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from driftguard.drift import HUMAN, PRUNE_CANDIDATE
from driftguard.errors import NotFound, Permanent, Retryable, Unauthorized, Unconfirmed
from driftguard.manifests import ResourceKey
from driftguard.redact import scrub_text
from driftguard.report import AppInfo, DriftReport
from notifier.channels import ALERT, FALLBACK, NOTICE, RESOLVE, Channel
from notifier.channels._http import HttpSender
from notifier.channels.pagerduty import INCIDENTS, incident_of
from notifier.config import ROUTABLE, NotifierConfig
from notifier.expand import Expander
from notifier.journal import Journal
from notifier.logs import event
from notifier.metrics import NotifierMetrics
from notifier.notices import NOTICE_TRIGGERS, notice_for
from notifier.outbox import Claimed, Outbox
from notifier.render import fallback_view, notice_view, view
from notifier.reverted import Reverted, reverted
from notifier.witness import WitnessStore

__all__ = ["RESOLVE_TRIGGERS", "Worker"]

RESOLVE_TRIGGERS = frozenset({"on-sync-succeeded", "on-drift-resolved"})


class Worker:
    """Takes work from the outbox until stopped."""

    def __init__(
        self,
        outbox: Outbox,
        expander: Expander,
        channels: dict[str, Channel],
        config: NotifierConfig,
        *,
        dedup_window: float,
        dead_letter_after: float,
        recheck_interval: float,
        metrics: NotifierMetrics | None = None,
        max_attempts: int = 8,
        max_retry_after: float = 300.0,
        retry_base: float = 2.0,
        retry_cap: float = 300.0,
        poll: float = 0.2,
        send_timeout: float = 10.0,
        journal: Journal | None = None,
        retention: float = 7 * 86400.0,
        intake_window: float = 300.0,
        witnesses: WitnessStore | None = None,
    ) -> None:
        self.outbox = outbox
        self.expander = expander
        self.channels = channels
        self.config = config
        self.metrics = metrics or NotifierMetrics(channels, outbox.depth)
        self.dedup_window = dedup_window
        self.dead_letter_after = dead_letter_after
        self.recheck_interval = recheck_interval
        self.max_attempts = max_attempts
        self.max_retry_after = max_retry_after
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.poll = poll
        self.journal = journal
        self.witnesses = witnesses
        self._has_pagerduty = any(ch.type == "pagerduty" for ch in channels.values())
        self.retention = retention
        self.windows = max(dedup_window, intake_window)
        self._last_sweep = 0.0
        self.sender = HttpSender(connect_timeout=min(3.05, send_timeout), read_timeout=send_timeout)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._expanding = False
        """True while the loop expands a notification (set and read without a lock: a stale answer
        only costs a wake-up of the other processes, or one poll's delay)."""
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(
            max_workers=max(2, len(channels)), thread_name_prefix="driftguard-send"
        )
        self._inflight: dict[str, Future[None]] = {}
        self._last_recheck = 0.0

    # --- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="driftguard-delivery", daemon=True)
            self._thread.start()
            self.outbox.listen(self.wake)  # PostgreSQL: other replicas' new work wakes this loop too
            # one connection per send thread and one for the intake, opened before the first webhook
            self.outbox.warm(len(self.channels) + 1)

    def wake(self) -> bool:
        """New work (this process's, or another replica's on PostgreSQL): do not wait for the next poll.

        True when the loop runs and is not expanding a notification, so it claims this work within
        moments (it waits, or is between claims and looks again once woken): the webhook then need
        not wake the other processes for it. An expansion may wait on a slow Argo CD for seconds;
        then False, and the webhook wakes the others.
        """
        ready = self._thread is not None and self._thread.is_alive() and not self._expanding
        self._wake.set()
        return ready

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self.outbox.unlisten()
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=True, cancel_futures=False)
        self.sender.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.run_once()
            except Exception as exc:  # the loop must survive anything; the outbox keeps the work
                event(
                    "worker_error",
                    level=logging.ERROR,
                    error=scrub_text(f"{type(exc).__name__}: {exc}")[:300],
                )
                busy = False
            if not busy:
                # this process's own work wakes it (wake()), other replicas' by LISTEN/NOTIFY on
                # PostgreSQL; the poll is the safety net
                self._wake.wait(self.poll)
                self._wake.clear()

    def run_once(self, *, wait: bool = False) -> bool:
        """Start sending what is due, expand what is due, queue re-checks; True when anything was done."""
        busy = self._start_sends()
        while (claimed := self.outbox.claim_notification()) is not None:
            self._expanding = True
            try:
                self._expand(claimed)
            finally:
                self._expanding = False
            busy = True
            self._start_sends()  # a slow Argo CD must not hold back messages already queued
        if wait:
            for future in list(self._inflight.values()):
                future.result()
            self._reap()
        now = time.time()
        if now - self._last_recheck >= min(self.recheck_interval, 5.0):
            self._last_recheck = now
            seen: set[tuple[str, str]] = set()
            for inc in self.outbox.due_rechecks(self.recheck_interval):
                # an app's episode and its PagerDuty incident kinds are one re-check
                if (inc["app_name"], inc["app_namespace"]) in seen:
                    continue
                seen.add((inc["app_name"], inc["app_namespace"]))
                body = {
                    "trigger": "recheck",
                    "app": {"metadata": {"name": inc["app_name"], "namespace": inc["app_namespace"]}},
                }
                self.outbox.add_notification(
                    body,
                    app=inc["app_name"],
                    app_namespace=inc["app_namespace"],
                    trigger="recheck",
                    received_at=now,
                )
                busy = True
        if now - self._last_sweep >= 30.0:
            self._last_sweep = now
            swept = self.outbox.sweep(
                dead_after=self.dead_letter_after, retention=self.retention, windows=self.windows
            )
            if swept and swept["dead"]:
                event("dead_letter_swept", level=logging.ERROR, messages=swept["dead"])
        return busy

    def _start_sends(self) -> bool:
        self._reap()
        started = False
        while (msg := self.outbox.claim_message(exclude_channels=frozenset(self._inflight))) is not None:
            self._submit(msg)
            started = True
        return started

    def _submit(self, msg: Claimed) -> None:
        future = self._pool.submit(self._send, msg)
        # the channel is free again: claim its next message now, not at the next poll
        future.add_done_callback(lambda _: self._wake.set())
        self._inflight[msg.row["channel"]] = future

    def drain(self, timeout: float = 30.0) -> None:
        """Run until the outbox holds no pending work, or ``timeout`` passes (tests, the demo, a shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.run_once(wait=True) or self._inflight:
                continue
            depth = self.outbox.depth()
            if depth["notifications"] == 0 and depth["messages"] == 0:
                return
            time.sleep(min(self.poll, max(0.0, deadline - time.monotonic())))

    def _reap(self) -> None:
        for channel, future in list(self._inflight.items()):
            if future.done():
                del self._inflight[channel]

    # --- expansion ----------------------------------------------------------------------------------------

    def _expand(self, claimed: Claimed) -> None:
        row = claimed.row
        name, namespace, trigger = row["app"], row["app_namespace"], row["trigger"]
        received_at = float(row["received_at"])
        app_info = AppInfo(name, namespace=namespace)
        stage = "expand"
        try:
            app, report = self.expander.report(name, namespace)
            app_info = report.app
            stage = "render"
            # one transaction for everything the expansion writes (PostgreSQL: one commit, one WAL
            # flush; all or nothing: before the commit the notification is still pending)
            with self.outbox.unit():
                messages, outcome = self._plan(app, report, trigger, row, received_at=received_at)
                stage = "queue"
                self._reap()
                # queued already leased to us for every channel not busy here: sent now, with no claim in between
                queued, leased = self.outbox.finish_and_claim(
                    claimed.id, messages, claim=frozenset(self.channels) - frozenset(self._inflight)
                )
        except NotFound as exc:
            self.outbox.finish_notification(claimed.id, [], error=str(exc))
            self.outbox.close_episode(app_info.key)  # a deleted app is not re-checked forever
            self.outbox.close_incident(app_info.key)
            for kind in INCIDENTS:
                self.outbox.close_incident(f"{app_info.key}#{kind}")
            self.metrics.expanded("app-not-found")
            event("app_not_found", level=logging.WARNING, app=f"{namespace}/{name}", notification=claimed.id)
            return
        except Exception as exc:  # anything else is retried, then ends in the fallback alert
            if stage == "queue":
                raise  # the outbox failed to queue (or commit): the loop logs it; the lease runs out, expanded again
            self._failed(claimed, stage=stage, exc=exc, app=app_info)
            return
        for msg in leased:
            self._submit(msg)
        self.metrics.expanded(outcome)
        self.metrics.changes(report)
        event(
            "expanded",
            app=report.app.key,
            trigger=trigger,
            outcome=outcome,
            alerting=len(report.alerting),
            suppressed=report.suppressed,
            queued=queued,
            fingerprint=report.fingerprint(),
        )

    def _failed(self, claimed: Claimed, *, stage: str, exc: Exception, app: AppInfo) -> None:
        """One failed expansion or rendering: counted, logged once, retried; the last one sends the fallback."""
        row = claimed.row
        attempts = int(row["attempts"])
        reason = scrub_text(f"{exc}" if stage == "expand" else f"{type(exc).__name__}: {exc}")[:300]
        self.metrics.failure(stage)
        self.metrics.expanded("unauthorized" if isinstance(exc, Unauthorized) else "retry")
        delay = self._backoff(attempts)
        age = time.time() - float(row["received_at"])
        give_up = attempts >= self.max_attempts or age + delay > self.dead_letter_after
        fields: dict[str, Any] = {
            "app": app.key,
            "trigger": row["trigger"],
            "stage": stage,
            "attempt": attempts,
            "max_attempts": self.max_attempts,
            "reason": reason,
        }
        if isinstance(exc, Unauthorized) and exc.permission:
            fields["missing_permission"] = exc.permission
        if not give_up:
            self.outbox.retry_notification(claimed.id, delay=delay, error=reason)
            event(f"{stage}_failed", level=logging.WARNING, retry_in_s=round(delay, 1), **fields)
            return
        link = self._link(app)
        messages = []
        for channel in self._fallback_targets(app):
            payload = self.channels[channel].payload(
                fallback_view(app, reason=reason, link=link), kind=FALLBACK
            )
            messages.append(
                {
                    "channel": channel,
                    "kind": FALLBACK,
                    "app": app.key,
                    "fingerprint": "fallback",
                    "payload": payload,
                    "received_at": float(row["received_at"]),
                }
            )
        queued = self.outbox.finish_notification(claimed.id, messages, error=reason, state="dead")
        self.metrics.expanded("fallback")
        event(f"{stage}_failed", level=logging.ERROR, fallback_alerts=queued, **fields)

    def _fallback_targets(self, app: AppInfo) -> list[str]:
        """Every channel a route could send this app's alerts to (classes unknown: all of them)."""
        return list(self.config.targets(DriftReport(app), set(ROUTABLE)))

    def _plan(
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
        link = self._link(report.app)
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
            if ch.type == "pagerduty":
                continue
            payload = ch.payload(view(report, link=link, kind=RESOLVE), kind=RESOLVE)
            out.append(_message(channel, RESOLVE, app_key, "resolve", payload, received_at))
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
            kinds = _alert_incidents(report) if ch.type == "pagerduty" else [""]
            for kind in kinds:
                payload = ch.payload({**v, "severity": severity, "incident": kind or "drift"}, kind=ALERT)
                out.append(_message(channel, ALERT, app_key, fingerprint, payload, received_at))
        return out

    def _plan_reverted(
        self, report: DriftReport, gone: Reverted, *, received_at: float
    ) -> list[dict[str, Any]]:
        """A drift self-heal (or a sync) put back before the read: the witnessed changes, or the resources named."""
        link = self._link(report.app)
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
            _message(
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
        if self._has_pagerduty:
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
        if not self._has_pagerduty:
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
        link = self._link(report.app)
        # one read for the usual case (nothing to resolve); a close only for what is open and gone
        gone = [f"{report.app.key}#{k}" for k in INCIDENTS if k not in holding]
        open_ = self.outbox.open_incidents(gone)
        for kind in INCIDENTS:
            key = f"{report.app.key}#{kind}"
            if key not in open_ or not self.outbox.close_incident(key):
                continue
            for channel in self.config.targets(report, set(ROUTABLE)):
                ch = self.channels[channel]
                if ch.type != "pagerduty":
                    continue
                payload = ch.payload(
                    {**view(report, link=link, kind=RESOLVE), "incident": kind}, kind=RESOLVE
                )
                out.append(
                    _message(channel, RESOLVE, report.app.key, f"resolve-{kind}", payload, received_at)
                )
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
        notice = notice_for(trigger, app, report.app, body=body, link=self._link(report.app))
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
            out.append(_message(channel, NOTICE, report.app.key, fingerprint, payload, received_at))
        if out:
            self._open(report, incident_of(notice))
        return out

    def _link(self, app: AppInfo) -> str:
        base = self.config.argocd_url.rstrip("/")
        return f"{base}/applications/{app.namespace}/{app.name}" if base else ""

    # --- sending ----------------------------------------------------------------------------------------------

    def _send(self, msg: Claimed) -> None:
        row = msg.row
        channel = self.channels.get(row["channel"])
        fields = {"channel": row["channel"], "app": row["app"], "kind": row["kind"]}
        try:
            if channel is None:
                raise Permanent(f"channel {row['channel']} is no longer configured")
            self.sender.send(channel, json.loads(row["payload"]))
        except Retryable as exc:
            self.metrics.failure("send")
            delay = self._backoff(int(row["attempts"]))
            if exc.retry_after:
                delay = max(delay, min(exc.retry_after, self.max_retry_after))
            state, delay = self.outbox.failed(
                msg, error=str(exc), delay=delay, dead_after=self.dead_letter_after
            )
            self.metrics.sent(row["channel"], "dead" if state == "dead" else "retry")
            event(
                "send_failed",
                level=logging.WARNING if state != "dead" else logging.ERROR,
                state=state,
                attempt=row["attempts"],
                retry_in_s=round(delay, 2),
                error=scrub_text(str(exc))[:300],
                **fields,
            )
            return
        except Unconfirmed as exc:
            self.metrics.failure("send")
            self.outbox.delivered(msg, state="unconfirmed", error=str(exc))
            self.metrics.sent(row["channel"], "unconfirmed")
            event("send_unconfirmed", level=logging.WARNING, error=scrub_text(str(exc))[:300], **fields)
            return
        except Permanent as exc:
            self.metrics.failure("send")
            self.outbox.failed(msg, error=str(exc), delay=None, dead_after=self.dead_letter_after)
            self.metrics.sent(row["channel"], "dead")
            event("dead_letter", level=logging.ERROR, error=scrub_text(str(exc))[:300], **fields)
            return
        # one commit for the sent mark and the journal's alert time (PostgreSQL; see Outbox.unit)
        with self.outbox.unit():
            latency = self.outbox.delivered(msg)
            if self.journal is not None and row["kind"] == ALERT:
                self.journal.alerted(row["app"], row["channel"], at=float(row["received_at"]) + latency)
        self.metrics.sent(row["channel"], "sent")
        self.metrics.delivered(row["channel"], latency)
        event("delivered", latency_ms=round(latency * 1000, 1), attempts=row["attempts"], **fields)

    def _backoff(self, attempts: int) -> float:
        base = min(self.retry_cap, self.retry_base * (2 ** max(0, attempts - 1)))
        return float(base * (0.5 + random.random() / 2))  # noqa: S311 - jitter, not crypto


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


def _message(
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

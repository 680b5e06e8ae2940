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

import json
import logging
import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from driftguard.errors import NotFound, Permanent, Retryable, Unauthorized, Unconfirmed
from driftguard.redact import scrub_text
from driftguard.report import AppInfo, DriftReport
from notifier.alerts.expand import Expander
from notifier.alerts.plan import Planner, message
from notifier.channels import ALERT, FALLBACK, INCIDENTS, Channel
from notifier.channels._http import HttpSender
from notifier.config import ROUTABLE, NotifierConfig
from notifier.journal import Journal
from notifier.logs import event
from notifier.metrics import NotifierMetrics
from notifier.outbox import Claimed, Outbox
from notifier.render import fallback_view
from notifier.witness import WitnessStore

__all__ = ["Worker"]


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
        self.planner = Planner(
            outbox,
            channels,
            config,
            self.metrics,
            dedup_window=dedup_window,
            journal=journal,
            witnesses=witnesses,
        )
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
                messages, outcome = self.planner.plan(app, report, trigger, row, received_at=received_at)
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
        link = self.planner.link(app)
        messages = []
        for channel in self._fallback_targets(app):
            payload = self.channels[channel].payload(
                fallback_view(app, reason=reason, link=link), kind=FALLBACK
            )
            messages.append(
                message(channel, FALLBACK, app.key, "fallback", payload, float(row["received_at"]))
            )
        queued = self.outbox.finish_notification(claimed.id, messages, error=reason, state="dead")
        self.metrics.expanded("fallback")
        event(f"{stage}_failed", level=logging.ERROR, fallback_alerts=queued, **fields)

    def _fallback_targets(self, app: AppInfo) -> list[str]:
        """Every channel a route could send this app's alerts to (classes unknown: all of them)."""
        return list(self.config.targets(DriftReport(app), set(ROUTABLE)))

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

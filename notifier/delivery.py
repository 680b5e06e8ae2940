"""The delivery worker: expand notifications, queue one message per channel, send with retries.

Runs as a thread in every gunicorn worker process; the outbox's leases keep them from taking the
same work. Each channel's messages are sent and backed off independently (exponential backoff
with jitter, at least the receiver's Retry-After), so a receiver that is down or slow delays only
its own messages; a message still failing after ``dead_letter_after`` is dead-lettered.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from driftguard.errors import DriftguardError, NotFound, Permanent, Retryable, UpstreamUnavailable
from notifier.channels import ALERT, RESOLVE, Channel
from notifier.channels._http import HttpSender
from notifier.config import ROUTABLE, NotifierConfig
from notifier.expand import Expander
from notifier.logs import event
from notifier.outbox import Claimed, Outbox
from notifier.render import view

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
        retry_base: float = 2.0,
        retry_cap: float = 300.0,
        poll: float = 0.2,
        send_timeout: float = 10.0,
    ) -> None:
        self.outbox = outbox
        self.expander = expander
        self.channels = channels
        self.config = config
        self.dedup_window = dedup_window
        self.dead_letter_after = dead_letter_after
        self.recheck_interval = recheck_interval
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.poll = poll
        self.sender = HttpSender(connect_timeout=min(3.05, send_timeout), read_timeout=send_timeout)
        self._stop = threading.Event()
        self._wake = threading.Event()
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

    def wake(self) -> None:
        """New work in this process: do not wait for the next poll."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=True, cancel_futures=False)
        self.sender.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.run_once()
            except Exception as exc:  # the loop must survive anything; the outbox keeps the work
                event("worker_error", level=logging.ERROR, error=f"{type(exc).__name__}: {exc}"[:300])
                busy = False
            if not busy:
                # other processes' work is found by polling; this process's own by wake()
                self._wake.wait(self.poll)
                self._wake.clear()

    def run_once(self, *, wait: bool = False) -> bool:
        """Expand what is due, start sending what is due; True when anything was done."""
        busy = False
        while (claimed := self.outbox.claim_notification()) is not None:
            self._expand(claimed)
            busy = True
        self._reap()
        while (msg := self.outbox.claim_message(exclude_channels=frozenset(self._inflight))) is not None:
            self._inflight[msg.row["channel"]] = self._pool.submit(self._send, msg)
            busy = True
        if wait:
            for future in list(self._inflight.values()):
                future.result()
            self._reap()
        now = time.time()
        if now - self._last_recheck >= min(self.recheck_interval, 5.0):
            self._last_recheck = now
            for inc in self.outbox.due_rechecks(self.recheck_interval):
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
        return busy

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
        try:
            _, report = self.expander.report(name, namespace)
        except NotFound as exc:
            self.outbox.finish_notification(claimed.id, [], outcome="app-not-found", error=str(exc))
            event("app_not_found", level=logging.WARNING, app=f"{namespace}/{name}", notification=claimed.id)
            return
        except UpstreamUnavailable as exc:
            delay = self._backoff(int(row["attempts"]))
            self.outbox.retry_notification(claimed.id, delay=delay, error=str(exc))
            event(
                "argocd_unavailable",
                level=logging.WARNING,
                app=f"{namespace}/{name}",
                retry_in_s=round(delay, 1),
                error=str(exc)[:200],
            )
            return
        except DriftguardError as exc:  # e.g. an Application whose ignore rules do not compile
            self.outbox.finish_notification(claimed.id, [], outcome="error", error=str(exc))
            event("expand_failed", level=logging.ERROR, app=f"{namespace}/{name}", error=str(exc)[:300])
            return
        messages = self._plan(report, trigger, received_at=float(row["received_at"]))
        outcome = (
            "alert" if any(m["kind"] == ALERT for m in messages) else ("resolve" if messages else "quiet")
        )
        queued = self.outbox.finish_notification(claimed.id, messages, outcome=outcome)
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

    def _plan(self, report: Any, trigger: str, *, received_at: float) -> list[dict[str, Any]]:
        app_key = report.app.key
        alerting = report.alerting
        link = self._link(report)
        out: list[dict[str, Any]] = []
        if alerting:
            fingerprint = report.fingerprint()
            for channel, severity in self.config.targets(report, {c.cls for c in alerting}).items():
                if self.outbox.recently_sent(app_key, channel, fingerprint, self.dedup_window):
                    self.outbox.count("driftguard_notifier_deduplicated_total", {"channel": channel})
                    continue
                payload = self.channels[channel].payload(
                    view(report, link=link, severity=severity), kind=ALERT
                )
                out.append(
                    {
                        "channel": channel,
                        "kind": ALERT,
                        "app": app_key,
                        "fingerprint": fingerprint,
                        "payload": payload,
                        "received_at": received_at,
                    }
                )
            self.outbox.open_incident(
                app_key, name=report.app.name, namespace=report.app.namespace, fingerprint=fingerprint
            )
            return out
        was_open = self.outbox.incident(app_key) is not None
        if not was_open and trigger not in RESOLVE_TRIGGERS:
            return out
        for channel in self.config.targets(report, set(ROUTABLE)):
            ch = self.channels[channel]
            if ch.type != "pagerduty" and not was_open:
                continue  # chat channels hear "resolved" only about drift they were told of
            payload = ch.payload(view(report, link=link, kind=RESOLVE), kind=RESOLVE)
            out.append(
                {
                    "channel": channel,
                    "kind": RESOLVE,
                    "app": app_key,
                    "fingerprint": "resolve",
                    "payload": payload,
                    "received_at": received_at,
                }
            )
        self.outbox.close_incident(app_key)
        return out

    def _link(self, report: Any) -> str:
        base = self.config.argocd_url.rstrip("/")
        return f"{base}/applications/{report.app.namespace}/{report.app.name}" if base else ""

    # --- sending ----------------------------------------------------------------------------------------------

    def _send(self, msg: Claimed) -> None:
        row = msg.row
        channel = self.channels.get(row["channel"])
        try:
            if channel is None:
                raise Permanent(f"channel {row['channel']} is no longer configured")
            self.sender.send(channel, json.loads(row["payload"]))
        except Retryable as exc:
            delay = max(self._backoff(int(row["attempts"])), exc.retry_after or 0.0)
            state = self.outbox.failed(msg, error=str(exc), delay=delay, dead_after=self.dead_letter_after)
            event(
                "send_failed",
                level=logging.WARNING if state != "dead" else logging.ERROR,
                channel=row["channel"],
                app=row["app"],
                kind=row["kind"],
                state=state,
                retry_in_s=round(delay, 2),
                error=str(exc)[:300],
            )
            return
        except Permanent as exc:
            self.outbox.failed(msg, error=str(exc), delay=None, dead_after=self.dead_letter_after)
            event(
                "dead_letter",
                level=logging.ERROR,
                channel=row["channel"],
                app=row["app"],
                kind=row["kind"],
                error=str(exc)[:300],
            )
            return
        latency = self.outbox.delivered(msg)
        event(
            "delivered",
            channel=row["channel"],
            app=row["app"],
            kind=row["kind"],
            latency_ms=round(latency * 1000, 1),
            attempts=row["attempts"],
        )

    def _backoff(self, attempts: int) -> float:
        base = min(self.retry_cap, self.retry_base * (2 ** max(0, attempts - 1)))
        return float(base * (0.5 + random.random() / 2))  # noqa: S311 - jitter, not crypto

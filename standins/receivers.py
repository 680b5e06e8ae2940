"""A local HTTP receiver standing in for Feishu, Slack and PagerDuty: it captures every request.

Each path answers what the test scripts (status, JSON body, headers, delay), default: the real
service's success answer. Faults: ``hang`` takes the message (it is captured: the chat shows it)
and answers only after that many seconds, as a receiver slower than our read timeout does;
``held`` takes the message the same way and answers once the test sets the path's event;
``resets`` closes the next N connections with a TCP reset before answering (nothing taken).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from standins.http import running

SUCCESS: dict[str, tuple[int, Any]] = {
    "/feishu": (200, {"code": 0, "msg": "success", "data": {}}),
    "/slack": (200, "ok"),
    "/slack-api": (200, {"ok": True, "channel": "C123", "ts": "1700000000.000100"}),
    "/pagerduty": (202, {"status": "success", "message": "Event processed", "dedup_key": "x"}),
}


@dataclass
class Captured:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receivers:
    url: str = ""
    captured: list[Captured] = field(default_factory=list)
    scripts: dict[str, list[tuple[int, Any, dict[str, str]]]] = field(default_factory=dict)
    delay: dict[str, float] = field(default_factory=dict)
    hang: dict[str, float] = field(default_factory=dict)
    held: dict[str, threading.Event] = field(default_factory=dict)
    resets: dict[str, int] = field(default_factory=dict)
    answered: list[tuple[str, float]] = field(default_factory=list)
    """(path, time) of every answer sent, after any hang."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, path: str, *answers: tuple[int, Any] | tuple[int, Any, dict[str, str]]) -> None:
        """Answer the next requests to ``path`` with these (status, body[, headers]), then succeed again."""
        self.scripts[path] = [(a[0], a[1], a[2] if len(a) > 2 else {}) for a in answers]  # type: ignore[misc]

    def channels(self, *, feishu_secret: str, routing_key: str, slack_locale: str = "") -> dict[str, Any]:
        """The notifier config's ``channels`` for Feishu, Slack and PagerDuty, all pointing here."""
        slack: dict[str, Any] = {"type": "slack", "url": self.url + "/slack"}
        if slack_locale:
            slack["locale"] = slack_locale
        return {
            "feishu": {"type": "feishu", "url": self.url + "/feishu", "secret": feishu_secret},
            "slack": slack,
            "pagerduty": {"type": "pagerduty", "url": self.url + "/pagerduty", "routing_key": routing_key},
        }

    def on(self, path: str) -> list[Captured]:
        with self.lock:
            return [c for c in self.captured if c.path == path]

    def pagerduty_alerts(self, path: str = "/pagerduty") -> list[dict[str, Any]]:
        """The alerts PagerDuty would hold after the captured events, by its documented dedup rules.

        Events API v2: a trigger whose ``dedup_key`` matches an open (triggered or acknowledged)
        alert does not open a new one: it is appended to that alert's log, and the alert keeps
        the summary it was opened with; ``resolve`` closes the open alert with that key; a trigger
        after the resolve opens a new alert.
        """
        alerts: list[dict[str, Any]] = []
        open_by_key: dict[str, dict[str, Any]] = {}
        for c in self.on(path):
            event = c.json()
            key, action = event.get("dedup_key", ""), event.get("event_action")
            current = open_by_key.get(key)
            if action == "trigger":
                summary = event["payload"]["summary"]
                if current is None:
                    current = {"dedup_key": key, "status": "triggered", "summary": summary, "log": []}
                    alerts.append(current)
                    open_by_key[key] = current
                current["log"].append(summary)
            elif action == "resolve" and current is not None:
                current["status"] = "resolved"
                del open_by_key[key]
        return alerts


class _Handler(BaseHTTPRequestHandler):
    rx: Receivers
    # HTTP/1.1 keep-alive with Nagle off, as the real services' servers (Go net/http, nginx) answer:
    # an HTTP/1.0 stand-in made every request a new connection and a new thread, which the real
    # receivers never cost a client that keeps its connections
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        rx = self.rx
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        with rx.lock:
            reset = rx.resets.get(self.path, 0) > 0
            if reset:
                rx.resets[self.path] -= 1
        if reset:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()  # RST: the client sees "connection reset by peer"
            self.close_connection = True
            return
        hang, held = rx.hang.get(self.path, 0.0), rx.held.get(self.path)
        if hang or held is not None:
            with rx.lock:
                rx.captured.append(Captured(self.path, dict(self.headers.items()), body, time.time()))
            if held is not None:
                held.wait(60)  # a bound only so a failed test leaves no thread behind
            else:
                time.sleep(hang)
            self._reply(200, SUCCESS.get(self.path, (200, {}))[1], {})
            return
        if rx.delay.get(self.path):
            time.sleep(rx.delay[self.path])
        with rx.lock:
            queue = rx.scripts.get(self.path)
            status, answer, headers = queue.pop(0) if queue else (*SUCCESS.get(self.path, (200, {})), {})
            if status < 300:
                rx.captured.append(
                    Captured(self.path, {k: v for k, v in self.headers.items()}, body, time.time())
                )
        self._reply(status, answer, headers)

    def _reply(self, status: int, answer: Any, headers: dict[str, str]) -> None:
        data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
        with self.rx.lock:
            self.rx.answered.append((self.path, time.time()))
        try:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Type", "text/plain" if isinstance(answer, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped waiting (its read timeout)


@contextmanager
def serve() -> Iterator[Receivers]:
    rx = Receivers()
    with running(type("H", (_Handler,), {"rx": rx})) as url:
        rx.url = url
        yield rx

"""How a stand-in answers badly: one ``Fault`` per request, the ways real upstreams and their proxies fail.

A stand-in computes its normal answer and hands it to ``send``; with a fault set, the client
gets instead a reset connection, a late or trickling answer, an error status, a proxy's HTML page,
JSON cut short, or a body of the wrong shape. Nothing here touches the code under test.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

__all__ = ["KINDS", "Fault", "refused_url", "send"]

KINDS = ("reset", "slow", "trickle", "status", "html", "truncated", "cut", "body")


@dataclass(frozen=True)
class Fault:
    """One way to answer badly.

    kind: ``reset`` (close the connection without answering), ``slow`` (answer after ``delay``
    seconds), ``trickle`` (send the body one byte every ``delay`` seconds), ``status`` (answer
    ``status`` with ``body`` or an error object), ``html`` (a proxy's HTML page with ``status``),
    ``truncated`` (the first half of the JSON, a complete HTTP message), ``cut`` (Content-Length of
    the whole answer, half of it sent, connection closed), ``body`` (``body`` as JSON, HTTP 200:
    a wrong shape; Python's ``json`` writes a float NaN as the non-JSON ``NaN``).
    """

    kind: str
    status: int = 200
    body: Any = None
    delay: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault {self.kind!r}; faults: {', '.join(KINDS)}")


def send(handler: BaseHTTPRequestHandler, status: int, payload: Any, fault: Fault | None = None) -> None:
    """Answer ``status`` with ``payload`` as JSON, or misbehave as ``fault`` says."""
    try:
        _send(handler, status, payload, fault)
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True  # the client gave up: that is what a deadline does


def _send(handler: BaseHTTPRequestHandler, status: int, payload: Any, fault: Fault | None) -> None:
    if fault is None:
        _write(handler, status, json.dumps(payload).encode())
        return
    if fault.kind == "reset":
        handler.close_connection = True
        handler.connection.setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
        )
        handler.connection.shutdown(socket.SHUT_RDWR)
        return
    if fault.kind == "slow":
        time.sleep(fault.delay)
        _write(handler, status, json.dumps(payload).encode())
        return
    data = json.dumps(payload).encode()
    if fault.kind == "trickle":
        _head(handler, status, len(data))
        for i in range(len(data)):
            handler.wfile.write(data[i : i + 1])
            handler.wfile.flush()
            time.sleep(fault.delay)
        return
    if fault.kind == "status":
        body = (
            fault.body if fault.body is not None else {"error": "injected", "code": 13, "message": "injected"}
        )
        _write(handler, fault.status, json.dumps(body).encode())
        return
    if fault.kind == "html":
        page = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
        _write(handler, fault.status, page, content_type="text/html")
        return
    if fault.kind == "truncated":
        _write(handler, status, data[: max(1, len(data) // 2)])
        return
    if fault.kind == "cut":
        handler.close_connection = True
        _head(handler, status, len(data))
        handler.wfile.write(data[: len(data) // 2])
        handler.wfile.flush()
        return
    _write(handler, 200, json.dumps(fault.body).encode())  # "body"


def _head(
    handler: BaseHTTPRequestHandler, status: int, length: int, content_type: str = "application/json"
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(length))
    handler.end_headers()
    handler.wfile.flush()


def _write(
    handler: BaseHTTPRequestHandler, status: int, data: bytes, *, content_type: str = "application/json"
) -> None:
    _head(handler, status, len(data), content_type)
    handler.wfile.write(data)


def refused_url() -> str:
    """An http URL on loopback where nothing listens (an upstream that is down: connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"

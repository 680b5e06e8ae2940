"""A reverse proxy in front of one of our own services, answering with a ``Fault`` when told to.

The services themselves answer honestly; what sits between them (an ingress, a sidecar, a
half-dead pod) is what resets, stalls, trickles, cuts or rewrites answers. This stand-in forwards
each request to the real upstream and then sends the upstream's answer through
``standins.faults.send``, so a test can put any fault between two real processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import requests

from standins.faults import Fault, send
from standins.http import running

__all__ = ["FaultyProxy", "serve"]

_FORWARDED = ("Authorization", "Content-Type", "Accept")


@dataclass
class FaultyProxy:
    upstream: str
    fault: Fault | None = None
    """Applied to every answer while set."""
    url: str = ""
    seen: list[dict[str, Any]] = field(default_factory=list)
    """Each request as the proxy received it: method, path, headers, body."""


def _handler(proxy: FaultyProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k in _FORWARDED if (v := self.headers.get(k))}
            proxy.seen.append(
                {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
            )
            fault = proxy.fault
            if fault is not None and fault.kind == "reset":
                send(self, 200, None, fault)  # before the upstream is even asked
                return
            resp = requests.request(
                self.command, proxy.upstream + self.path, data=body, headers=headers, timeout=10
            )
            try:
                payload = resp.json()
            except ValueError:
                payload = {"error": resp.text[:200]}
            send(self, resp.status_code, payload, fault)

        do_GET = _forward
        do_POST = _forward

    return Handler


@contextmanager
def serve(upstream: str) -> Iterator[FaultyProxy]:
    """A proxy to ``upstream`` (a base URL) on a free loopback port, for a ``with`` block."""
    proxy = FaultyProxy(upstream.rstrip("/"))
    with running(_handler(proxy)) as url:
        proxy.url = url
        yield proxy


def as_json(proxy: FaultyProxy, n: int = -1) -> Any:
    """The body of the ``n``-th request the proxy saw, as JSON."""
    return json.loads(proxy.seen[n]["body"])

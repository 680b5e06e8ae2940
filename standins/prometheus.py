"""A local HTTP server that answers Prometheus' instant-query API (/api/v1/query) as scripted."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

from standins.faults import Fault, send
from standins.http import running


@dataclass
class FakePrometheus:
    url: str = ""
    value: Any = "0.995"
    """The sample's value as Prometheus writes it (a string: "NaN", "+Inf" allowed); None answers an
    empty vector; anything else (a bool, a number) is sent as given, as a broken exporter or proxy would."""
    result_type: str = "vector"
    """``vector`` (one sample), ``scalar`` or ``matrix`` (one series of one sample)."""
    fault: Fault | None = None
    queries: list[str] = field(default_factory=list)
    status: int = 200
    garbage: bool = False
    delay: float = 0.0


class _Handler(BaseHTTPRequestHandler):
    fake: FakePrometheus

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        fake = self.fake
        url = urlparse(self.path)
        if url.path != "/api/v1/query":
            self.send_response(404)
            self.end_headers()
            return
        fake.queries.append(parse_qs(url.query)["query"][0])
        if fake.delay:
            time.sleep(fake.delay)
        if fake.garbage:
            body = b"<html>proxy error</html>"
        elif fake.status != 200:
            body = json.dumps(
                {"status": "error", "errorType": "bad_data", "error": "parse error at char 5"}
            ).encode()
        else:
            send(self, 200, self._success(), fake.fault)
            return
        self.send_response(fake.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _success(self) -> dict[str, Any]:
        """The query API's success envelope (prometheus docs/querying/api.md) around the scripted value."""
        fake, now = self.fake, time.time()
        result: list[Any]
        if fake.result_type == "scalar":
            result = [now, fake.value]
        elif fake.value is None:
            result = []
        elif fake.result_type == "matrix":
            result = [{"metric": {}, "values": [[now, fake.value]]}]
        else:
            result = [{"metric": {}, "value": [now, fake.value]}]
        return {"status": "success", "data": {"resultType": fake.result_type, "result": result}}


@contextmanager
def serve() -> Iterator[FakePrometheus]:
    fake = FakePrometheus()
    with running(type("H", (_Handler,), {"fake": fake})) as url:
        fake.url = url
        yield fake

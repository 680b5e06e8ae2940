"""One way to run a stand-in: a threaded HTTP server on a free loopback port for a ``with`` block."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["running"]


@contextmanager
def running(handler: type[BaseHTTPRequestHandler], *, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 (over TLS with ``tls``); yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

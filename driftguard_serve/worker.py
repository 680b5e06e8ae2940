"""gunicorn's gthread worker, but no thread is held until a whole request has arrived (issue 31).

gthread hands a connection to a thread as soon as it is readable; the thread then reads the
request head and body blocking, with no deadline. Twelve connections sending one header byte every
5 s held every thread of the notifier, and ``/healthz`` stopped answering. Here the worker's main
loop reads each request (its head, then a body of the ``Content-Length`` it announces) without
blocking, next to gthread's own keep-alive connections, and only a complete request is given to a
thread. A request that is not complete within ``DRIFTGUARD_HTTP_READ_TIMEOUT`` seconds of its first
byte being awaited is answered 408 and closed; one client address holds at most
``DRIFTGUARD_HTTP_MAX_CONNECTIONS_PER_CLIENT`` connections per worker process (more are answered
503 and closed at once). TLS (the admission listener) is unwrapped here too: the handshake is
read under the same deadline, never in a thread.

Not supported (answered at once, never read by a thread): ``Transfer-Encoding`` request bodies
(411: every client of ours sends ``Content-Length``), heads over 64 KiB (431), bodies over
``DRIFTGUARD_HTTP_MAX_BODY_BYTES`` (413).
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import ssl
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gunicorn import http, sock  # type: ignore[import-untyped]
from gunicorn.workers.gthread import TConn, ThreadWorker  # type: ignore[import-untyped]

from driftguard.http_limits import HttpLimits, http_limits

__all__ = ["GuardedWorker"]

MAX_HEAD = 64 * 1024
MAX_BUFFERED = 64 * 1024 * 1024
"""Bytes of unfinished requests one worker holds at most: past it the connection that reads more is
refused (503), so slow bodies on many connections cannot take the pod's memory."""
_STATUS = {
    408: b"408 Request Timeout",
    411: b"411 Length Required",
    413: b"413 Content Too Large",
    431: b"431 Request Header Fields Too Large",
    400: b"400 Bad Request",
    503: b"503 Service Unavailable",
}


@dataclass
class _Reading:
    deadline: float
    buf: bytearray = field(default_factory=bytearray)
    handshaking: bool = False
    continued: bool = False


class _Conn(TConn):  # type: ignore[misc]
    """gthread's connection, which gives its client's slot back once, however it is closed."""

    def __init__(self, *args: Any, on_close: Any) -> None:
        super().__init__(*args)
        self._on_close = on_close

    def close(self, graceful: bool = False) -> None:
        if self._on_close is not None:
            self._on_close, done = None, self._on_close
            done()
        super().close(graceful=graceful)


def request_state(buf: bytes | bytearray, *, max_body: int) -> int:
    """0 while more is needed, -1 when ``buf`` holds a whole request, else the HTTP status to refuse it with."""
    return _state(buf, max_body=max_body)[0]


def _state(buf: bytes | bytearray, *, max_body: int) -> tuple[int, bool]:
    """``request_state`` and whether the head asks for ``100 Continue`` before its body."""
    end = buf.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
    if end < 0:
        return (431 if len(buf) > MAX_HEAD else 0), False
    length: int | None = None
    expect = False
    for line in bytes(buf[:end]).split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            return 400, False
        key = name.strip().lower()
        if key == b"transfer-encoding":
            return 411, False
        if key == b"expect":
            expect = value.strip().lower() == b"100-continue"
        if key == b"content-length":
            raw = value.strip()
            # two lengths could frame the request two ways (ours, gunicorn's): refused
            if not raw.isdigit() or len(raw) > 18 or length is not None:
                return 400, False
            length = int(raw)
    length = length or 0
    if length > max_body:
        return 413, False
    return (-1 if len(buf) >= end + 4 + length else 0), expect


class GuardedWorker(ThreadWorker):  # type: ignore[misc]
    """``--worker-class driftguard_serve.worker.GuardedWorker``: gthread with read deadlines and a per-client bound."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits: HttpLimits = http_limits(os.environ)
        self.reading: dict[Any, _Reading] = {}
        self.clients: Counter[str] = Counter()
        self.buffered = 0

    # --- connections in -------------------------------------------------------------------------

    def accept(self, listener: Any) -> None:
        try:
            client_sock, client_addr = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        who = client_addr[0] if isinstance(client_addr, tuple) and client_addr else "local"
        if self.clients[who] >= self.limits.per_client:
            _refuse(client_sock, 503)
            return
        self.clients[who] += 1
        self.nr_conns += 1
        conn = _Conn(
            self.cfg, client_sock, client_addr, listener.getsockname(), on_close=partial(self._left, who)
        )
        self.enqueue_req(conn)

    def _left(self, who: str) -> None:
        self.clients[who] -= 1
        if self.clients[who] <= 0:
            del self.clients[who]

    def enqueue_req(self, conn: Any) -> None:
        """Every path to a thread comes here (a new connection, a kept-alive one, a pipelined request)."""
        if getattr(conn, "_dg_complete", False):
            conn._dg_complete = False
            super().enqueue_req(conn)
            return
        state = _Reading(deadline=time.monotonic() + self.limits.read_timeout)
        conn.sock.setblocking(False)
        if conn.parser is not None:  # kept alive: what the last body's drain read ahead comes first
            state.buf += conn.parser.unreader.take_buffered()
            self.buffered += len(state.buf)
        elif self.cfg.is_ssl:
            conn.sock = sock.ssl_context(self.cfg).wrap_socket(
                conn.sock,
                server_side=True,
                suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
                do_handshake_on_connect=False,
            )
            state.handshaking = True
        self.reading[conn] = state
        if state.buf and self._advance(conn, state):
            return
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _on_readable(self, conn: Any, _fileobj: Any) -> None:
        state = self.reading.get(conn)
        if state is None:
            return
        try:
            if state.handshaking:
                conn.sock.do_handshake()
                state.handshaking = False
            while len(state.buf) <= MAX_HEAD + self.limits.max_body:
                chunk = conn.sock.recv(65536)
                if not chunk:
                    self._drop(conn, 0)  # the client went away before its request was whole
                    return
                state.buf += chunk
                self.buffered += len(chunk)
                if self.buffered > MAX_BUFFERED:
                    self._drop(conn, 503)
                    return
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
            pass
        except (OSError, ValueError):
            self._drop(conn, 0)
            return
        if self._advance(conn, state, registered=True):
            return

    def _advance(self, conn: Any, state: _Reading, *, registered: bool = False) -> bool:
        """Hand a whole request to a thread, or refuse a bad one; False while more is needed."""
        if state.handshaking:
            return False
        verdict, expect = _state(state.buf, max_body=self.limits.max_body)
        if verdict == 0:
            if expect and not state.continued:  # curl waits for it before sending a body
                state.continued = True
                with contextlib.suppress(OSError, ValueError):
                    conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            return False
        if registered:
            self.poller.unregister(conn.sock)
        del self.reading[conn]
        self.buffered -= len(state.buf)
        if verdict != -1:
            self._drop(conn, verdict, registered=False)
            return True
        if conn.parser is None:
            # what gthread's TConn.init() does in a thread: the parser over the (unwrapped) socket
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
            conn.initialized = True
        conn.parser.unreader.unread(bytes(state.buf))
        conn.data_ready = True
        conn._dg_complete = True
        self.enqueue_req(conn)
        return True

    def _drop(self, conn: Any, status: int, *, registered: bool = True) -> None:
        if registered:
            state = self.reading.pop(conn, None)
            if state is not None:
                self.buffered -= len(state.buf)
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(conn.sock)
        if status:
            _answer(conn.sock, status)
        self.nr_conns -= 1
        conn.close()

    # --- deadlines -------------------------------------------------------------------------------

    def murder_pending(self) -> None:
        """gthread's own pending connections, then every request not whole by its deadline (408)."""
        super().murder_pending()
        now = time.monotonic()
        for conn, state in list(self.reading.items()):
            if state.deadline <= now:
                self._drop(conn, 0 if state.handshaking else 408)


def _answer(s: Any, status: int) -> None:
    body = _STATUS[status]
    head = b"HTTP/1.1 " + body + b"\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    try:
        s.setblocking(False)
        s.send(head)
    except (OSError, ValueError):
        pass  # best effort: the client is slow or gone, and the connection closes either way


def _refuse(s: Any, status: int) -> None:
    _answer(s, status)
    with contextlib.suppress(OSError):
        s.close()

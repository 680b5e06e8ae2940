"""The preload client: ``generate`` handed to a forked child of the server, or None to render in-process.

What ``cmp_plugin/__main__.py`` runs first for ``generate`` with DRIFTGUARD_CMP_PRELOAD on (front.c
is the same client without an interpreter), and what starts a server when none listens. Imports
``os``, ``sys`` and ``_socket`` only.
"""

from __future__ import annotations

import os
import sys

from cmp_plugin.preload.protocol import (
    GO,
    HANDSHAKE_TIMEOUT,
    HELLO,
    KEY_NAME,
    MAX_REQUEST,
    NONCE,
    PER_APP,
    READY,
    STARTING,
    encode_request,
    peer,
    proof,
    recv_exact,
    same,
    socket_path,
)

TYPE_CHECKING = False  # see cmp_plugin/launch.py: this runs before anything else is imported
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["run_preloaded"]


def run_preloaded(environ: Mapping[str, str]) -> int | None:
    """Render through the preload server: the exit code, or None to render in-process (never raises)."""
    import _socket

    path = socket_path(environ)
    if path is None:
        return None
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:  # a closed one: the socket would take its number and be sent as the render's stdio
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    cwd = -1
    committed = False
    try:
        sock.settimeout(HANDSHAKE_TIMEOUT)
        try:
            sock.connect(path)
        except (BlockingIOError, TimeoutError):  # a full backlog (EAGAIN): busy, not gone
            return None
        except OSError:  # no server yet, a socket left by one that is gone, a file in its place
            _start_server(path, environ)
            return None
        pid, uid = peer(sock)
        if uid != os.geteuid() or pid <= 0:
            # someone else's socket, or a server in another PID namespace (a cache directory
            # shared with another container, whose plugin may be another version): send it nothing
            return None
        if os.getsid(pid) != os.getsid(0):
            # a server started from another session (generate run by hand in a kubectl exec): no
            # child of it can join a group of this session, so it could never serve these
            # commands; one started from here replaces it (it exits when its socket is gone)
            _start_server(path, environ)
            return None
        hello = recv_exact(sock, 1 + NONCE)
        if len(hello) != 1 + NONCE or hello[:1] != HELLO:
            # no child took the connection (a server that is stopped or gone): the descriptors are
            # not sent, since a connection waiting in a backlog would hold this command's stdout open
            return None
        # each side proves it holds the server's key before the other sends anything that matters:
        # an impostor at the socket gets no environment and no descriptors, an impostor caller
        # (a tool connects: Landlock cannot refuse a connect) gets no render
        from cmp_plugin.paths import open_private

        key = open_private(os.path.join(os.path.dirname(path), KEY_NAME), 64)
        if key is None or len(key) != 32:
            return None
        server_nonce, client_nonce = hello[1:], os.urandom(NONCE)
        sock.sendall(client_nonce + proof(key, b"client", server_nonce, client_nonce, os.getpid(), pid))
        expected = proof(key, b"server", server_nonce, client_nonce, os.getpid(), pid)
        if not same(recv_exact(sock, len(expected)), expected):
            return None
        cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        umask = os.umask(0)
        os.umask(umask)
        body = encode_request(umask, os.getpgrp(), environ)
        if len(body) - 4 > MAX_REQUEST:  # the server's bound: the body after its length
            return None
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2, cwd))
        sent = sock.sendmsg([body[:65536]], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        sock.sendall(body[sent:])
        if recv_exact(sock, 1) != READY:
            return None  # the child could not take the render over: nothing has run
        sock.sendall(GO)
        committed = True  # from here the render is the child's; argocd-cmp-server times it
        sock.settimeout(None)
        code = recv_exact(sock, 1)
        if len(code) == 1:
            return code[0]
    except OSError:  # before GO (a timeout, a reset): render in-process; after GO: the child failed
        if not committed:
            return None
    finally:
        sock.close()
        if cwd >= 0:
            os.close(cwd)
    sys.stderr.write("driftguard: error: the preloaded render process ended without an exit code\n")
    return 2


def _start_server(path: str, environ: Mapping[str, str]) -> None:
    """Start the preload server in the background (errors are ignored); back off while starts fail.

    The marker ``preload.starting`` holds how many starts have not come up (the server removes it
    once it listens). The next start waits 30 s after one, doubling up to an hour: every server
    that dies becomes a zombie under argocd-cmp-server (PID 1 there reaps nothing), so a start that
    keeps failing must not cost one process every 30 s. The expired marker is claimed by an atomic
    rename: of several renders arriving together, one starts the server.
    """
    import time

    from cmp_plugin.paths import open_private, write_private
    from cmp_plugin.sandbox import available

    if not available():
        return  # without Landlock nothing keeps a render's tool from replacing it (sandbox.py)
    cache = os.path.dirname(path)
    marker = os.path.join(cache, STARTING)
    attempts = 0
    try:
        info = os.lstat(marker)
    except FileNotFoundError:
        info = None
    except OSError:
        return
    if info is not None:
        try:
            attempts = max(1, int(open_private(marker, 32) or b"1"))
        except ValueError:
            attempts = 1
        if time.time() - info.st_mtime < min(30 * 2 ** (attempts - 1), 3600):
            return  # one is starting, or starts keep failing: this render goes in-process
        claim = f"{marker}.{os.getpid()}.claim"
        try:
            os.rename(marker, claim)  # only one of the renders that found it expired gets it
        except OSError:
            return
        try:
            os.unlink(claim)
        except OSError:
            pass
    try:
        if info is None:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, b"1")
            finally:
                os.close(fd)
        else:
            write_private(marker, b"%d" % (attempts + 1))
    except OSError:  # another render created it first (it starts the server), or no space
        return
    try:
        env = {k: v for k, v in environ.items() if not k.startswith(PER_APP)}
        out = os.open(os.devnull, os.O_RDWR)
        try:
            os.posix_spawn(
                sys.executable,
                [sys.executable, "-P", "-m", "cmp_plugin.preload.server", path],
                env,
                file_actions=[(os.POSIX_SPAWN_DUP2, out, fd) for fd in (0, 1, 2)],
                setpgroup=0,  # not the caller's group: argocd-cmp-server kills that after each command
            )
        finally:
            os.close(out)
    except OSError:
        pass

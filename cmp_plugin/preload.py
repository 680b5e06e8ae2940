"""The preloaded renderer: ``generate`` forked from a process that has already imported the plugin.

A small chart renders with helm in ~70 ms; before this, ``driftguard-cmp generate`` spent about as
long again starting Python and importing the plugin (~20 ms interpreter, ~70 ms of imports: CPU
time on the render's critical path, measured with bench/real_charts.py). With
``DRIFTGUARD_CMP_PRELOAD=on`` (the shipped sidecar manifests set it) the first ``generate`` starts a
*preload server* beside the cache (``$DRIFTGUARD_CMP_CACHE_DIR/preload.sock``) and renders as usual;
every later ``generate`` connects to a child the server has forked ahead (it waits in accept(),
every module loaded; the server forks the next as soon as one takes a connection, so the fork is
never on a render's path). The child then becomes this render completely:

- it joins the calling command's process group, so argocd-cmp-server's kill of that group on
  timeout or after the command (``cmpserver/plugin/plugin.go``, runCommand) reaches it and its
  tools as before;
- it takes the caller's stdin/stdout/stderr and working directory as file descriptors
  (SCM_RIGHTS), its umask and its whole environment, and sets its own resource limits;
- it runs the same code as an in-process render (launch plan, guards, everything) and sends back
  the exit code, which the caller exits with.

What a tenant controls never reaches the server: it only forks the children that accept. The request
(environment, file descriptors) is read by the child, after the fork, so no tenant's bytes are ever
in the state the next render starts from. The server starts with the sidecar's environment minus
Argo CD's per-app variables, from ``/``, with ``-P`` (no checkout on ``sys.path``). Both ends check
the peer's uid (SO_PEERCRED); the socket lives in the cache directory, which must be a directory
of this uid that nobody else can write and that no render's tool may read or write
(``sandbox.reaches``). Same uid is not enough: a tool a render runs is the same uid, and may run
code. So each server writes a fresh random key beside its socket (``preload.key``, 0600, before
the socket appears), and every connection starts with a challenge-response both ways: the child
sends HELLO and a nonce, the caller answers with its nonce and an HMAC-SHA256 of both nonces and
both pids (its own, the listening server's, as SO_PEERCRED names them) under the key, and the
child answers with its own HMAC. The caller sends its environment and descriptors only to a
child that proved it holds the key; a child serves only a caller that did. Tools never hold the
key: Landlock keeps them out of the cache directory and refuses them ptrace attach (a plugin
process's /proc/<pid>/mem); the plugin's processes are not dumpable and tools hold no
capability, so their /proc/<pid>/environ (ptrace read, which Landlock allows) is closed too
(sandbox.py). The key is never in an argv or an environment.

Anything unexpected before the child has said it runs the render (no server, a stale socket, a
server of another uid, a server whose code changed on disk, a child that cannot join the group, a
slow answer, a full backlog) makes the caller render in-process, as without preloading; so
preloading can make a render faster, never fail. A new server is started only when nobody listens
on the socket (a busy one is left alone) or when the one there is of another session (started by
a ``generate`` run by hand, in a ``kubectl exec``): no child of it could join argocd-cmp-server's
process groups, so it would serve nothing. An exception the render does not catch ends the child
as it ends the interpreter: the traceback, then exit 1. The caller imports only ``os``, ``sys``
and ``_socket``.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # see launch.py: this runs before anything else is imported
if TYPE_CHECKING:
    import socket as socket_module
    from _socket import socket as Socket
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "KEY_NAME",
    "SOCKET_NAME",
    "decode_request",
    "enabled",
    "encode_request",
    "mac",
    "proof",
    "run_preloaded",
    "serve",
]

SOCKET_NAME = "preload.sock"
KEY_NAME = "preload.key"
"""The server's secret (32 random bytes, mode 0600) beside its socket: only the plugin reads it."""
STARTING = "preload.starting"
MAGIC = b"driftguard-preload 2"
NONCE = 32
"""Bytes of each side's challenge; a proof is an HMAC-SHA256 (32 bytes)."""
HELLO, GO, READY, NOT_READY = b"H", b"G", b"R", b"N"
HANDSHAKE_TIMEOUT = 2.0
"""Seconds the caller waits for the child's HELLO, then for its READY, before rendering in-process."""
REQUEST_TIMEOUT = 10.0
MAX_REQUEST = 4 << 20
"""The environment Argo CD passes is bounded by the kernel's ARG_MAX (2 MiB on Linux); twice that."""
TRUE = ("1", "true", "yes", "on")
"""The words settings.boolean reads as true; anything else is off here, and the settings report it."""
# variables set per Application by argocd-cmp-server (ARGOCD_APP_*, ARGOCD_ENV_* from plugin.env,
# PARAM_*): never in the server's own environment (docs/user-guide/build-environment.md upstream)
_PER_APP = ("ARGOCD_", "PARAM_", "KUBE_VERSION", "KUBE_API_VERSIONS")
# what a Python process may add to its own environment at start (PEP 538's locale coercion): the
# native front, a C program, never has it; the child keeps the server's
_OWN = frozenset({"LC_CTYPE"})


def enabled(environ: Mapping[str, str]) -> bool:
    return environ.get("DRIFTGUARD_CMP_PRELOAD", "").strip().lower() in TRUE


def _socket_path(environ: Mapping[str, str]) -> str | None:
    """The socket path when the cache directory is ours and private; None otherwise (no preloading)."""
    from cmp_plugin.launch import cache_dir

    cache = cache_dir(environ)
    if not os.path.isabs(cache):
        return None  # inside the checkout: the settings refuse it (cmp_plugin/settings.py)
    try:
        info = os.lstat(cache)
    except FileNotFoundError:
        try:
            os.makedirs(cache, mode=0o700, exist_ok=True)
            info = os.lstat(cache)
        except OSError:
            return None
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        return None
    from cmp_plugin.sandbox import reaches

    if reaches(cache):
        return None  # a tool could plant a socket and a key there (DRIFTGUARD_CMP_TOOL_*_PATHS)
    path = os.path.join(cache, SOCKET_NAME)
    return path if len(os.fsencode(path)) < 100 else None  # sun_path is 108 bytes


def _peer(sock: Socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end (SO_PEERCRED)."""
    import _socket

    cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # struct ucred: pid, uid, gid
    return int.from_bytes(cred[0:4], sys.byteorder), int.from_bytes(cred[4:8], sys.byteorder)


def _peer_uid(sock: Socket) -> int:
    return _peer(sock)[1]


def mac(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 (RFC 2104) over the C module alone: ``hmac`` imports hashlib, ~8 ms per render."""
    from _sha256 import sha256  # type: ignore[import-not-found]

    if len(key) > 64:
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(bytes(b ^ 0x36 for b in key) + message).digest()
    return bytes(sha256(bytes(b ^ 0x5C for b in key) + inner).digest())


def proof(
    key: bytes, side: bytes, server_nonce: bytes, client_nonce: bytes, client: int, server: int
) -> bytes:
    """What ``side`` (b"client" or b"server") sends to prove it holds the key, for this connection.

    Both challenges and both pids as the kernel names them (SO_PEERCRED: the caller, the server
    that listens): a proof made for one connection is worth nothing on another, so a process in
    the middle that relays one learns nothing it can use.
    """
    pids = client.to_bytes(4, "big") + server.to_bytes(4, "big")
    return mac(key, side + b"\0" + server_nonce + client_nonce + pids)


def _same(a: bytes, b: bytes) -> bool:
    from _operator import _compare_digest  # hmac.compare_digest without importing hmac

    return bool(_compare_digest(a, b))


def encode_request(umask: int, pgid: int, environ: Mapping[str, str]) -> bytes:
    """The request after the fds: a length, then NUL-separated fields (no NUL is ever in a variable)."""
    fields = [MAGIC, b"%d" % umask, b"%d" % pgid]
    fields += [os.fsencode(k) + b"=" + os.fsencode(v) for k, v in environ.items()]
    data = b"\0".join(fields)
    return len(data).to_bytes(4, "big") + data


def decode_request(body: bytes) -> tuple[int, int, dict[str, str]]:
    """(umask, pgid, environment) from a request body without its length; ValueError when malformed."""
    fields = body.split(b"\0")
    if fields[0] != MAGIC or len(fields) < 3:
        raise ValueError("not a preload request")
    env = {}
    for item in fields[3:]:
        key, sep, value = item.partition(b"=")
        if not sep or not key:
            raise ValueError("a malformed variable")
        env[os.fsdecode(key)] = os.fsdecode(value)
    return int(fields[1]), int(fields[2]), env


def run_preloaded(environ: Mapping[str, str]) -> int | None:
    """Render through the preload server: the exit code, or None to render in-process (never raises)."""
    import _socket

    path = _socket_path(environ)
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
        pid, uid = _peer(sock)
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
        hello = _recv_exact(sock, 1 + NONCE)
        if len(hello) != 1 + NONCE or hello[:1] != HELLO:
            # no child took the connection (a server that is stopped or gone): the descriptors are
            # not sent, since a connection waiting in a backlog would hold this command's stdout open
            return None
        # each side proves it holds the server's key before the other sends anything that matters:
        # an impostor at the socket gets no environment and no descriptors, an impostor caller
        # (a tool connects: Landlock cannot refuse a connect) gets no render
        from cmp_plugin.launch import open_private

        key = open_private(os.path.join(os.path.dirname(path), KEY_NAME), 64)
        if key is None or len(key) != 32:
            return None
        server_nonce, client_nonce = hello[1:], os.urandom(NONCE)
        sock.sendall(client_nonce + proof(key, b"client", server_nonce, client_nonce, os.getpid(), pid))
        expected = proof(key, b"server", server_nonce, client_nonce, os.getpid(), pid)
        if not _same(_recv_exact(sock, len(expected)), expected):
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
        if _recv_exact(sock, 1) != READY:
            return None  # the child could not take the render over: nothing has run
        sock.sendall(GO)
        committed = True  # from here the render is the child's; argocd-cmp-server times it
        sock.settimeout(None)
        code = _recv_exact(sock, 1)
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


def _recv_exact(sock: Socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _start_server(path: str, environ: Mapping[str, str]) -> None:
    """Start the preload server in the background (errors are ignored); back off while starts fail.

    The marker ``preload.starting`` holds how many starts have not come up (the server removes it
    once it listens). The next start waits 30 s after one, doubling up to an hour: every server
    that dies becomes a zombie under argocd-cmp-server (PID 1 there reaps nothing), so a start that
    keeps failing must not cost one process every 30 s. The expired marker is claimed by an atomic
    rename: of several renders arriving together, one starts the server.
    """
    import time

    from cmp_plugin.launch import open_private, write_private
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
        env = {k: v for k, v in environ.items() if not k.startswith(_PER_APP)}
        out = os.open(os.devnull, os.O_RDWR)
        try:
            os.posix_spawn(
                sys.executable,
                [sys.executable, "-P", "-m", "cmp_plugin.preload", path],
                env,
                file_actions=[(os.POSIX_SPAWN_DUP2, out, fd) for fd in (0, 1, 2)],
                setpgroup=0,  # not the caller's group: argocd-cmp-server kills that after each command
            )
        finally:
            os.close(out)
    except OSError:
        pass


# --- the server (imports freely: it starts once) -------------------------------------------------


def _warm() -> None:
    """Import what ``generate`` imports, so a forked child starts with all of it loaded."""
    # extension modules a render loads (content cache, plan names, limits): each is a dlopen of
    # ~0.5 ms on the render's critical path when the child imports it itself
    import _blake2  # noqa: F401
    import _sha256  # noqa: F401
    import ctypes  # noqa: F401 - PR_SET_PDEATHSIG for the children forked ahead (_die_with)
    import resource  # noqa: F401

    import yaml  # noqa: F401

    import cmp_plugin.cli
    import cmp_plugin.guards
    import cmp_plugin.guards.implicit_defaults
    import cmp_plugin.pipeline
    import cmp_plugin.render_cache
    import cmp_plugin.render_log
    import cmp_plugin.renderers
    import cmp_plugin.schema_refs  # noqa: F401
    from cmp_plugin.fingerprint import code_stamp

    code_stamp()  # the render cache's code stamp, computed once for every child


def _changed(files: dict[str, int]) -> bool:
    """Whether a module file the server loaded changed on disk since (then the server stops)."""
    for f, mtime in files.items():
        try:
            if os.stat(f).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


def _code_files() -> dict[str, int]:
    """mtime of every loaded module file of this project, when the server has warmed up."""
    roots = tuple(
        os.path.dirname(m.__file__) + os.sep
        for m in (sys.modules["cmp_plugin"], sys.modules["driftguard"])
        if m.__file__
    )
    out = {}
    for module in list(sys.modules.values()):
        f = getattr(module, "__file__", None)
        if f and f.startswith(roots):
            try:
                out[f] = os.stat(f).st_mtime_ns
            except OSError:
                out[f] = -1
    return out


def serve(path: str) -> None:
    """Accept renders on ``path`` until the socket is removed or replaced, or the code changes on disk.

    In the sidecar that is the container's life: one server, ~17 MB resident, shared copy-on-write with
    every render. It never exits on its own there, because argocd-cmp-server (PID 1, which
    inherits it when the render that started it ends) does not reap orphans: an exit would leave
    a zombie.
    """
    import contextlib
    import gc
    import signal
    import socket
    import time

    from cmp_plugin.launch import write_private
    from cmp_plugin.sandbox import reaches, undumpable

    os.chdir("/")
    undumpable()  # the key in its memory (and every child's): no /proc/<pid>/mem for the same uid
    if reaches(os.path.dirname(path)):
        return  # _socket_path refuses it too: a tool could plant a socket and a key there
    _warm()
    code = _code_files()
    # a fresh key for each server, in place before its socket is: the callers' proof that they
    # talk to the server the plugin started, and the server's that a caller is the plugin
    _KEY[:] = [os.urandom(32)]
    write_private(os.path.join(os.path.dirname(path), KEY_NAME), _KEY[0])
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # beside the socket (os.replace is atomic within a directory) and no longer than its name:
    # every path _socket_path accepts must also fit here, in sun_path's 108 bytes
    tmp = os.path.join(os.path.dirname(path), f"{os.getpid():x}.tmp")
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    old = os.umask(0o177)
    try:
        listener.bind(tmp)
    finally:
        os.umask(old)
    listener.listen(64)
    os.replace(tmp, path)
    mine = os.stat(path).st_ino
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    for stream in (sys.stdout, sys.stderr):  # nothing buffered here may end up in a render's output
        stream.flush()
    with contextlib.suppress(OSError):
        _libc()
    gc.freeze()  # what is loaded now stays shared with every child (no copy-on-write by the GC)
    started = False
    setbacks = 0  # forks that failed, or children that died or stalled without a connection, in a row
    try:
        while not _changed(code):
            try:
                taken, pid = _prefork(listener, code)
            except OSError:  # no pid or fd left (a pids limit under load): wait, never exit for it
                setbacks += 1
                if _gone(path, mine):
                    break
                time.sleep(min(0.1 * 2**setbacks, 5.0))
                continue
            if not started:
                # a server counts as started once it has a child to serve: one that cannot fork
                # leaves the marker, and _start_server backs off instead of starting one per render
                started = True
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(os.path.dirname(path), STARTING))
            # the parent waits until that child has taken a connection, then forks the next: the
            # fork (~2.5 ms for this process) happens while no render waits for it
            try:
                outcome = _wait_for_take(taken, pid, listener, path, mine, code)
            finally:
                os.close(taken)
            if outcome == "taken":
                setbacks = 0
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # it waits in accept() or is stuck: no render is lost
            if outcome == "stop" or _gone(path, mine):
                break
            setbacks += 1  # "gone" or "stuck": a new child, after a pause that grows
            time.sleep(min(0.1 * 2 ** (setbacks - 1), 5.0))
    finally:
        try:
            if os.stat(path).st_ino == mine:
                os.unlink(path)
        except OSError:
            pass


def _gone(path: str, mine: int) -> bool:
    """Whether our socket was removed or replaced (another server took over); else the key is ours.

    Two servers starting at once (a marker that expired under both) each write their key before
    their socket: the one whose socket stays may find the other's key there, and no caller could
    prove anything to it. The socket's owner puts its own key back.
    """
    try:
        if os.stat(path).st_ino != mine:
            return True
    except OSError:
        return True
    from cmp_plugin.launch import open_private, write_private

    key = os.path.join(os.path.dirname(path), KEY_NAME)
    try:
        if _KEY and open_private(key, 64) != _KEY[0]:
            write_private(key, _KEY[0])
    except OSError:
        pass
    return False


def _prefork(listener: socket_module.socket, code: dict[str, int]) -> tuple[int, int]:
    """Fork the child that takes the next connection: (read end of its "taken" pipe, its pid)."""
    import signal

    server = os.getpid()
    taken, tell = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(taken)
        os.close(tell)
        raise
    if pid == 0:
        try:
            os.close(taken)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the render waits for its tools
            _die_with(server)
            conn, _ = listener.accept()
            _die_with(0)  # from here it is a render, the caller's: it outlives a server that dies
            stale = _changed(code)
            os.write(tell, b"s" if stale else b"a")
            os.close(tell)
            listener.close()
            if stale or os.getppid() != server or _peer_uid(conn) != os.geteuid():
                # changed code, a server that is gone (this child is an orphan: the next render
                # finds nobody listening and starts a new one), or someone else: no HELLO, and the
                # caller renders in-process
                conn.close()
                os._exit(0)
            _child(conn)
        finally:
            os._exit(70)  # a child never returns into the server's loop, whatever happened
    os.close(tell)
    return taken, pid


def _die_with(server: int) -> None:
    """SIGKILL this process when ``server`` (its parent) dies; 0: no longer.

    A child waiting in accept() whose server is gone would otherwise wait there for ever, holding
    the listener (nobody may connect again: its socket can be removed with its directory).
    PR_SET_PDEATHSIG through libc (Linux); a parent already gone by then is checked for after.
    """
    import signal

    try:
        _libc().prctl(1, int(signal.SIGKILL) if server else 0, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the getppid check below
        pass
    if server and os.getppid() != server:
        os._exit(0)


_LIBC: list[Any] = []
_KEY: list[bytes] = []


def _libc() -> Any:
    """libc through ctypes, opened once in the server (before the forks) so no child pays for it."""
    if not _LIBC:
        import ctypes

        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


STALL = 1.0
"""Seconds a connection may wait while the child forked for it has not taken it (stopped? stuck?)."""


def _wait_for_take(
    taken: int, pid: int, listener: socket_module.socket, path: str, mine: int, code: dict[str, int]
) -> str:
    """ "taken" (the child has a connection), "gone" (it died without one), "stuck" or "stop".

    Every 2 s without a connection the socket and the code on disk are looked at: a socket removed
    or replaced (another server took over) or a changed module stops the server. A connection
    waiting STALL seconds that the child has not taken means the child is stuck: it is frozen
    (SIGSTOP, so it cannot take one now) and, unless it took one after all, replaced.
    """
    import contextlib
    import select
    import signal
    import time

    pending_since = 0.0
    while True:
        watched = [taken] if pending_since else [taken, listener.fileno()]
        wait = max(0.0, pending_since + STALL - time.monotonic()) if pending_since else 2.0
        ready, _, _ = select.select(watched, [], [], wait)
        if taken in ready:
            return _said(taken)
        if ready:  # the listener: a connection waits; the child should take it within moments
            pending_since = time.monotonic()
            continue
        if pending_since:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
            if select.select([taken], [], [], 0)[0]:  # it took the connection just now after all
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
                return _said(taken)
            return "stuck"
        if _gone(path, mine) or _changed(code):
            return "stop"


def _said(taken: int) -> str:
    """What the child forked ahead wrote on its pipe: "a" taken, "s" stale code; nothing: it died."""
    said = os.read(taken, 1)
    return "taken" if said == b"a" else "stop" if said == b"s" else "gone"


def _same_sidecar(env: Mapping[str, str]) -> bool:
    """Whether the caller's settings are this server's: only the per-app variables may differ.

    A child runs unconfined (tools are sandboxed, the plugin is not), so it must never take the
    platform's settings (tool paths, sandbox paths, policy, limits) from the connection: a tool a
    render runs can connect too (connecting to a socket is no write Landlock can refuse), and
    would otherwise choose ``DRIFTGUARD_CMP_TOOL_WRITE_PATHS=/`` or its own ``DRIFTGUARD_HELM``.
    argocd-cmp-server gives every command the sidecar's environment plus the per-app entries
    (cmpserver/plugin/plugin.go ``generateManifest``: ``os.Environ()`` + the request's env), so a
    real caller always matches; anything else renders in its own process, as without a server.
    """
    own = {k: v for k, v in os.environ.items() if not k.startswith(_PER_APP) and k not in _OWN}
    return own == {k: v for k, v in env.items() if not k.startswith(_PER_APP) and k not in _OWN}


def _child(conn: Socket) -> None:
    """Take the caller's render over: its group, descriptors, directory, umask and environment."""
    import socket

    try:
        conn.settimeout(REQUEST_TIMEOUT)
        server_nonce = os.urandom(NONCE)
        conn.sendall(HELLO + server_nonce)
        answer = _recv_exact(conn, NONCE + 32)
        client, server = _peer(conn)[0], os.getppid()  # the server: checked by _prefork
        expected = proof(_KEY[0], b"client", server_nonce, answer[:NONCE], client, server)
        if len(answer) != NONCE + 32 or not _same(answer[NONCE:], expected):
            os._exit(0)  # not the plugin: it learns nothing, not even why
        conn.sendall(proof(_KEY[0], b"server", server_nonce, answer[:NONCE], client, server))
        fds: list[int] = []
        head, ancdata, _, _ = conn.recvmsg(65536, socket.CMSG_LEN(4 * 4))
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += [
                    int.from_bytes(data[i : i + 4], sys.byteorder, signed=True)
                    for i in range(0, len(data) - 3, 4)
                ]
        if len(head) < 4 or len(fds) != 4:
            os._exit(1)
        size = int.from_bytes(head[:4], "big")
        if size > MAX_REQUEST:
            os._exit(1)
        body = head[4:]
        while len(body) < size:
            chunk = conn.recv(min(1 << 20, size - len(body)))
            if not chunk:
                os._exit(1)
            body += chunk
        umask, pgid, env = decode_request(body)
        if not _same_sidecar(env):
            conn.sendall(NOT_READY)  # the caller renders in-process, under its own settings
            os._exit(1)
        try:
            os.setpgid(0, pgid)
        except OSError:
            conn.sendall(NOT_READY)
            os._exit(1)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        os.fchdir(fds[3])
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.umask(umask)
        # the sidecar's settings are this process's own (_same_sidecar): only the per-app
        # variables change, in place (every putenv/unsetenv costs)
        for key in [k for k in os.environ if k.startswith(_PER_APP) and k not in env]:
            del os.environ[key]
        for key, value in env.items():
            if key.startswith(_PER_APP) and os.environ.get(key) != value:
                os.environ[key] = value
        sys.argv = ["driftguard-cmp", "generate"]
        conn.sendall(READY)
        if _recv_exact(conn, 1) != GO:
            os._exit(1)  # the caller gave up waiting and renders itself
        conn.settimeout(None)
    except Exception:  # a broken request: the caller renders in-process
        os._exit(1)
    from cmp_plugin import cli, launch

    def report(code: int) -> None:
        try:
            conn.sendall(bytes([code & 0xFF]))
        except OSError:
            pass

    launch.limit_resources(sys.argv[1:], os.environ)
    # with the render cache on, no planned tool (launch.render_cache_on)
    early = None if launch.render_cache_on(os.environ) else launch.early_start(sys.argv[1:], os.environ)
    try:
        cli.run(early=early, report=report)  # exits the process itself
    except SystemExit as exc:
        code = _exit_status(exc)
    except BaseException:  # what the interpreter does with an exception nobody caught
        try:
            sys.excepthook(*sys.exc_info())
        except BaseException:  # noqa: S110 - out of memory even for the traceback: the code still goes back
            pass
        code = 1
    else:  # pragma: no cover - cli.run never returns
        code = 1
    for stream in (sys.stdout, sys.stderr):  # the interpreter flushes both as it exits
        try:
            stream.flush()
        except Exception:  # noqa: S112 - a reader that went away: nothing more can be said
            continue
    report(code)
    os._exit(code)


def _exit_status(exc: SystemExit) -> int:
    """The status the interpreter exits with for ``exc`` (printing a message that is not a number)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    sys.stderr.write(f"{exc.code}\n")
    return 1


if __name__ == "__main__":
    serve(sys.argv[1])

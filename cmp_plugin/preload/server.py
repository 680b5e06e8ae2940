"""The preload server: imports the plugin once, then forks children ahead that each take one render.

Started by the client (``python -P -m cmp_plugin.preload.server SOCKET``) when nobody listens on
the socket; the protocol is in protocol.py, the whole design in this package's docstring.
"""

from __future__ import annotations

import os
import sys

from cmp_plugin.preload.protocol import (
    GO,
    HELLO,
    KEY_NAME,
    MAX_REQUEST,
    NONCE,
    NOT_READY,
    OWN,
    PER_APP,
    READY,
    REQUEST_TIMEOUT,
    STARTING,
    decode_request,
    peer,
    peer_uid,
    proof,
    recv_exact,
    same,
)

TYPE_CHECKING = False  # see cmp_plugin/launch.py: this runs before anything else is imported
if TYPE_CHECKING:
    import socket as socket_module
    from _socket import socket as Socket
    from collections.abc import Mapping
    from typing import Any

__all__ = ["serve"]


# --- the server (imports freely: it starts once) -------------------------------------------------


def _warm() -> None:
    """Import what ``generate`` imports, so a forked child starts with all of it loaded.

    A render served from the render cache imports nothing and compiles no pattern in the child
    (tests/cmp_plugin/test_preload_warm.py): each costs a hit more than the hit's own work.
    """
    # extension modules a render loads (content cache, plan names, limits): each is a dlopen of
    # ~0.5 ms on the render's critical path when the child imports it itself
    import _blake2  # noqa: F401
    import _sha256  # type: ignore[import-not-found]  # noqa: F401
    import ctypes  # noqa: F401 - PR_SET_PDEATHSIG for the children forked ahead (_die_with)
    import resource  # noqa: F401

    import yaml  # noqa: F401

    import cmp_plugin.cli
    import cmp_plugin.guards.registry
    import cmp_plugin.helmchart.schema_refs
    import cmp_plugin.pipeline
    import cmp_plugin.render_cache
    import cmp_plugin.render_log
    import cmp_plugin.renderers
    import cmp_plugin.sandbox
    import cmp_plugin.tool_versions  # noqa: F401
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

    from cmp_plugin.paths import write_private
    from cmp_plugin.sandbox import reaches, undumpable

    os.chdir("/")
    undumpable()  # the key in its memory (and every child's): no /proc/<pid>/mem for the same uid
    if reaches(os.path.dirname(path)):
        return  # socket_path refuses it too: a tool could plant a socket and a key there
    _warm()
    rehearsal = _stage_rehearsal(os.path.dirname(path))
    code = _code_files()
    # a fresh key for each server, in place before its socket is: the callers' proof that they
    # talk to the server the plugin started, and the server's that a caller is the plugin
    _KEY[:] = [os.urandom(32)]
    write_private(os.path.join(os.path.dirname(path), KEY_NAME), _KEY[0])
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # beside the socket (os.replace is atomic within a directory) and no longer than its name:
    # every path socket_path accepts must also fit here, in sun_path's 108 bytes
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
                taken, pid = _prefork(listener, code, rehearsal)
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
    from cmp_plugin.paths import open_private, write_private

    key = os.path.join(os.path.dirname(path), KEY_NAME)
    try:
        if _KEY and open_private(key, 64) != _KEY[0]:
            write_private(key, _KEY[0])
    except OSError:
        pass
    return False


def _prefork(
    listener: socket_module.socket, code: dict[str, int], rehearsal: str | None = None
) -> tuple[int, int]:
    """Fork the child that takes the next connection: (read end of its "taken" pipe, its pid)."""
    import select
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
            if rehearsal and not select.select([listener], [], [], 0)[0]:  # no render waits yet
                _rehearse(rehearsal)
            conn, _ = listener.accept()
            _die_with(0)  # from here it is a render, the caller's: it outlives a server that dies
            stale = _changed(code)
            os.write(tell, b"s" if stale else b"a")
            os.close(tell)
            listener.close()
            if stale or os.getppid() != server or peer_uid(conn) != os.geteuid():
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


REHEARSAL = "preload-rehearsal"
_REHEARSAL_CHART = {
    "Chart.yaml": "apiVersion: v2\nname: rehearsal\nversion: 0.1.0\n",
    "values.yaml": "replicas: 1\n",
    "templates/configmap.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"
        "data:\n  replicas: {{ .Values.replicas | quote }}\n"
    ),
}


def _stage_rehearsal(cache: str) -> str | None:
    """The server's own chart, in its private cache directory, for :func:`_rehearse` (None: not written)."""
    from cmp_plugin.paths import write_private

    root = os.path.join(cache, REHEARSAL)
    try:
        for name, text in _REHEARSAL_CHART.items():
            path = os.path.join(root, "chart", name)
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            write_private(path, text.encode())
    except OSError:
        return None
    return root


def _rehearse(root: str) -> bool:
    """The part of a render served from the cache that is the plugin's own work (settings,
    parameters, policy, the confinement walk, the fingerprint), once, on the server's chart.

    Run by a child forked ahead before it takes a connection, while no render waits: a render
    writes reference counts on ~700 pages it shares with the server, and each first write copies a
    page (~4 us here, more in a VM). Rehearsed, the render's own copies halve (bench/monorepo.py
    --probe). Reads the server's chart and the sidecar's settings only; writes nothing. True when
    it ran to the end.
    """
    from pathlib import Path

    try:
        from cmp_plugin import fingerprint, policy
        from cmp_plugin.argo_env import AppEnv
        from cmp_plugin.settings import CmpSettings

        environ = {
            **{k: v for k, v in os.environ.items() if not k.startswith(PER_APP)},
            "ARGOCD_APP_NAME": "rehearsal",
            "ARGOCD_APP_NAMESPACE": "rehearsal",
            "ARGOCD_APP_SOURCE_PATH": "chart",
        }
        settings = CmpSettings.from_env(environ)
        env = policy.apply(AppEnv.from_environ(environ), settings)
        chart = Path(root, "chart")
        return fingerprint.compute(chart, Path(root), env, settings, "helm", environ).digest is not None
    except Exception:  # a rehearsal only: the render itself says what is wrong
        return False


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
    own = {k: v for k, v in os.environ.items() if not k.startswith(PER_APP) and k not in OWN}
    return own == {k: v for k, v in env.items() if not k.startswith(PER_APP) and k not in OWN}


def _child(conn: Socket) -> None:
    """Take the caller's render over: its group, descriptors, directory, umask and environment."""
    import socket

    try:
        conn.settimeout(REQUEST_TIMEOUT)
        server_nonce = os.urandom(NONCE)
        conn.sendall(HELLO + server_nonce)
        answer = recv_exact(conn, NONCE + 32)
        client, server = peer(conn)[0], os.getppid()  # the server: checked by _prefork
        expected = proof(_KEY[0], b"client", server_nonce, answer[:NONCE], client, server)
        if len(answer) != NONCE + 32 or not same(answer[NONCE:], expected):
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
        for key in [k for k in os.environ if k.startswith(PER_APP) and k not in env]:
            del os.environ[key]
        for key, value in env.items():
            if key.startswith(PER_APP) and os.environ.get(key) != value:
                os.environ[key] = value
        sys.argv = ["driftguard-cmp", "generate"]
        conn.sendall(READY)
        if recv_exact(conn, 1) != GO:
            os._exit(1)  # the caller gave up waiting and renders itself
        conn.settimeout(None)
    except Exception:  # a broken request: the caller renders in-process
        os._exit(1)
    from cmp_plugin import cli, launch, spawn

    def report(code: int) -> None:
        try:
            conn.sendall(bytes([code & 0xFF]))
        except OSError:
            pass

    spawn.limit_resources(sys.argv[1:], os.environ)
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

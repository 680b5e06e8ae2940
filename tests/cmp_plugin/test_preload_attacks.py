"""The preload server under attack: a busy or odd sidecar, a render that crashes, every path length.

Each case runs the real console entry (both ways it is installed: Python, and the native front) the way argocd-cmp-server does (its own process group in the
same session) against a real server, and holds preloading to its rule: a render is the same render
as without it, or a little faster, never a failure or a different answer, and the server is never
replaced, crash-looped or left behind because of one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cmp_plugin.preload import protocol as preload
from tests.helpers import start_cmp, wait_until

from .conftest import cmp_env, kill_preload_servers
from .test_preload import Run, alive, server_pid, starts, wrapper

APP = "charts/platform"


@pytest.fixture(autouse=True)
def _no_server_left(no_preload_servers_left: None) -> None:
    """Every server a test here starts is killed at its end (tests/cmp_plugin/conftest.py)."""


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A directory with a short path (tmp_path can be too long to pad a socket path to the limit)."""
    path = Path(tempfile.mkdtemp(prefix="dg-", dir="/tmp"))
    yield path
    kill_preload_servers(path)  # the server and the child it forked ahead
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def render(repo: Path, tmp_path: Path, caller: list[str]) -> Callable[..., Run]:
    (tmp_path / "tool-log").mkdir()  # beside the caches: a tool may write its log, not a cache
    log = tmp_path / "tool-log" / "helm-starts.jsonl"
    helm = wrapper(tmp_path, log)

    def run(
        cache: Path,
        *,
        preload_value: str = "on",
        app: str = APP,
        start_new_session: bool = False,
        **extra: str,
    ) -> Run:
        env = {
            **cmp_env(app, None, **extra),
            "DRIFTGUARD_CMP_CACHE_DIR": str(cache),
            "DRIFTGUARD_HELM": str(helm),
            # the instrumented helm logs beside the test (the sandbox lets a tool write nowhere else)
            "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": str(log.parent),
            "DRIFTGUARD_CMP_PRELOAD": preload_value,
            # each render starts its helm: these tests count who started it (the render cache's
            # hits are tests/cmp_plugin/test_render_cache.py's)
            "DRIFTGUARD_CMP_RENDER_CACHE_BYTES": "0",
        }
        proc = start_cmp(
            repo / app,
            env,
            "generate",
            caller=caller,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **({"start_new_session": True} if start_new_session else {"process_group": 0}),
        )
        out, err = proc.communicate(timeout=120)
        # what argocd-cmp-server does after the command; the group may empty between the two
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return Run(proc, out, err)

    run.log = log  # type: ignore[attr-defined]
    return run


def _preloaded_render(render: Callable[..., Run], cache: Path) -> bool:
    run = render(cache)
    assert run.returncode == 0, run.stderr
    return preloaded(render, run)


def preloaded(render: Callable[..., Run], run: Run) -> bool:
    """Whether ``run``'s helm was started by a forked child rather than by the command itself."""
    return starts(render.log)[-1]["ppid"] != run.pid  # type: ignore[attr-defined]


def kill_server(cache: Path) -> None:
    pid = server_pid(cache)
    if pid:  # it answered a moment ago: it may have stopped since
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_render_that_crashes_fails_as_it_does_without_preloading(
    render: Callable[..., Run], repo: Path, tmp_path: Path
) -> None:
    """An exception nobody catches: the interpreter's traceback and exit 1, preloaded or not.

    Real trigger: the platform runs the sidecar with an ASCII stdout and a tenant's chart has a
    non-ASCII value, so writing the manifests raises UnicodeEncodeError (not an OSError).
    """
    (repo / APP / "templates" / "greeting.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\ndata:\n  text: grüße\n",
        encoding="utf-8",
    )
    ascii_out = {"PYTHONIOENCODING": "ascii"}
    off = render(tmp_path / "cache-off", preload_value="off", **ascii_out)
    assert off.returncode == 1 and "UnicodeEncodeError" in off.stderr, off.stderr
    cache = tmp_path / "cache-on"
    try:
        render(cache, **ascii_out)  # starts the server
        wait_until(lambda: server_pid(cache), "the preload server answers")
        on = render(cache, **ascii_out)
        assert preloaded(render, on)
        assert on.returncode == off.returncode, on.stderr
        assert on.stderr.startswith("Traceback (most recent call last):\n"), on.stderr
        assert on.stderr.splitlines()[-1] == off.stderr.splitlines()[-1]
    finally:
        kill_server(cache)


def test_a_cache_path_at_the_socket_limit_still_gets_a_server(
    render: Callable[..., Run], short_tmp: Path
) -> None:
    """A socket path of 99 bytes is accepted; the server's temporary name beside it must fit too.

    Otherwise every server started there dies binding it, leaving its start marker, and a new one
    is started (and dies) every 30 s for the sidecar's life.
    """
    room = 99 - len(f"{short_tmp}/") - len(f"/{preload.SOCKET_NAME}")
    cache = short_tmp / ("c" * room)
    assert len(os.fsencode(cache / preload.SOCKET_NAME)) == 99
    first = render(cache)
    assert first.returncode == 0, first.stderr
    server = wait_until(lambda: server_pid(cache), "the preload server answers")
    second = render(cache)
    assert second.returncode == 0 and second.stdout == first.stdout
    assert preloaded(render, second)
    assert not (cache / preload.STARTING).exists()
    assert alive(server)


def test_a_busy_server_is_not_replaced(render: Callable[..., Run], tmp_path: Path) -> None:
    """A full backlog (many renders at once, a slow fork) is no reason to start a second server.

    The render that finds it full renders in-process; the server that was there keeps the socket
    and serves the next render (a replaced one would exit later, a zombie under PID 1).
    """
    cache = tmp_path / "cache"
    assert render(cache).returncode == 0
    server = wait_until(lambda: server_pid(cache), "the preload server answers")
    # it listens before its first child is forked; once it has one it drops the start marker
    # (server.py): stopped before that, the marker would stay and read as a second start
    wait_until(lambda: not (cache / preload.STARTING).exists(), "the server to have a child to serve")
    path = cache / preload.SOCKET_NAME
    inode = path.stat().st_ino
    waiting: list[socket.socket] = []
    os.kill(server, signal.SIGSTOP)  # busy: accepts nothing while the backlog fills
    try:
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(str(path))
            except BlockingIOError:
                s.close()
                break
            waiting.append(s)
        busy = render(cache)
        assert busy.returncode == 0, busy.stderr
        assert not preloaded(render, busy)
        # a start decided on writes the marker first and removes it once its socket replaced ours
        assert not (cache / preload.STARTING).exists(), "a second server is being started"
        assert path.stat().st_ino == inode, "a second server replaced the busy one"
    finally:
        for s in waiting:
            s.close()
        os.kill(server, signal.SIGCONT)
    try:
        # the server first works through what waited (each child finds its caller gone and exits)
        wait_until(lambda: _preloaded_render(render, cache), "a render is preloaded again")
        assert server_pid(cache) == server
    finally:
        kill_server(cache)


def test_a_server_started_from_another_session_gives_way(render: Callable[..., Run], tmp_path: Path) -> None:
    """Someone runs ``driftguard-cmp generate`` by hand (``kubectl exec``: a session of its own) first.

    The server it starts is in that session, so no child of it can ever join a group of
    argocd-cmp-server's session: without giving way it would serve nothing for the container's
    life, and every render would pay the round trip for nothing.
    """
    cache = tmp_path / "cache"
    by_hand = render(cache, start_new_session=True)
    assert by_hand.returncode == 0, by_hand.stderr
    stranger = wait_until(lambda: server_pid(cache), "the preload server answers")
    try:
        first = render(cache)  # argocd-cmp-server's session: that child cannot join the group
        assert first.returncode == 0 and first.stdout == by_hand.stdout, first.stderr
        assert not preloaded(render, first)
        wait_until(lambda: server_pid(cache) not in (0, stranger), "a server of this session took over")
        wait_until(lambda: _preloaded_render(render, cache), "a render of this session is preloaded")
    finally:
        kill_server(cache)
        # the stranger gives way by itself once its socket is replaced: it may exit (and be
        # reaped) between the look and the kill
        with contextlib.suppress(ProcessLookupError):
            os.kill(stranger, signal.SIGKILL)


def test_a_start_that_keeps_failing_backs_off(render: Callable[..., Run], tmp_path: Path) -> None:
    """Every server that dies is a zombie under argocd-cmp-server: a failing start is retried ever later.

    A directory where the socket goes makes every server die at its bind; the marker counts the
    starts that did not come up, and the next one waits 30 s, then 60 s, ... (here: the marker aged).
    """
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    (cache / preload.SOCKET_NAME).mkdir()
    marker = cache / preload.STARTING

    def attempts() -> str:
        return str(wait_until(lambda: marker.exists() and marker.read_text(), "the start marker"))

    def age(seconds: int) -> None:
        t = time.time() - seconds
        os.utime(marker, (t, t))

    for _ in range(2):
        run = render(cache)
        assert run.returncode == 0, run.stderr
        assert not preloaded(render, run)
        assert attempts() == "1"
    age(31)
    assert render(cache).returncode == 0
    assert attempts() == "2"
    age(31)  # the second failure waits 60 s
    assert render(cache).returncode == 0
    assert attempts() == "2"
    age(61)
    assert render(cache).returncode == 0
    assert attempts() == "3"

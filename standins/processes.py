"""Real service processes for tests, benchmarks and the demo: gunicorn on a free loopback port."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import requests

__all__ = ["free_port", "git", "start_cli", "start_gunicorn", "stop", "wait_until"]

T = TypeVar("T")


def wait_until(check: Callable[[], T], what: str, timeout: float = 120.0, interval: float = 0.05) -> T:
    """Poll ``check()`` until it returns something truthy, and return that: the one way tests, the
    stand-ins and the demo wait for a condition (never a fixed sleep).

    ``timeout`` only keeps a broken run from hanging: it is generous, and nothing is asserted about
    how long the wait took. Past it, AssertionError says what was awaited. Generous means for a
    loaded machine: on a shared 2-core machine a niced test run was seen stalled for over a
    minute, and a longer limit costs nothing when the condition comes.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {timeout:g} s for {what}")
        time.sleep(interval)


def git(repo: Path, *args: str, env: Mapping[str, str]) -> str:
    """``git -C repo ARGS`` with a fixed example identity (commits need one); its stdout, stripped."""
    identity = {
        "GIT_AUTHOR_NAME": "driftguard-demo",
        "GIT_AUTHOR_EMAIL": "demo@example.com",
        "GIT_COMMITTER_NAME": "driftguard-demo",
        "GIT_COMMITTER_EMAIL": "demo@example.com",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], env={**env, **identity}, capture_output=True, text=True, check=True
    ).stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_gunicorn(
    app: str,
    port: int,
    env: dict[str, str],
    log: Path,
    *,
    workers: int = 2,
    threads: int = 4,
    certfile: str = "",
    keyfile: str = "",
    ca: str = "",
) -> subprocess.Popen[bytes]:
    """Start ``gunicorn app`` in its own process group and wait until /healthz answers.

    ``certfile``/``keyfile``: serve TLS; ``ca``: the CA the health probe trusts (https then).
    """
    argv = [
        sys.executable,
        "-m",
        "gunicorn",
        "--bind",
        f"127.0.0.1:{port}",  # the socket itself is bound here and inherited (_started)
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--worker-class",
        "gthread",
    ]
    if certfile or keyfile:
        argv += ["--certfile", certfile, "--keyfile", keyfile]
    return _started([*argv, app], port, env, log, what=app, ca=ca)


def start_cli(
    cli: str,
    port: int,
    env: dict[str, str],
    log: Path,
    *,
    workers: int = 2,
    threads: int = 4,
    ca: str = "",
    args: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """Start a service as its Deployment does, by its console script (``driftguard-notifier``,
    ``driftguard-analysis``): settings checked once, gunicorn with the multiprocess metrics config,
    TLS from the service's own variables. Waits until /healthz answers (over https when ``ca`` is given).
    ``args``: more of the script's options (``--part admission``).
    """
    argv = [str(Path(sys.executable).parent / cli), "--bind", f"127.0.0.1:{port}"]
    argv += ["--workers", str(workers), "--threads", str(threads), *args]
    return _started(argv, port, env, log, what=cli, ca=ca)


def _listening(port: int) -> socket.socket:
    """127.0.0.1:``port`` bound and listening in this process, for gunicorn to inherit.

    The port was chosen free (``free_port``) but gunicorn binds a second or more later, after its
    start-up: meanwhile anything else on the machine (another checkout's tests, with gunicorns and
    databases of their own) may take it, and then the service fails to start, or worse, the
    health check is answered by that other process. Bound now, the port is ours from here on. A
    port a stopped service used may still be held by its exiting workers: the bind waits for them.
    """

    def bound() -> socket.socket | None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn's own bind
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            s.close()
            if exc.errno == errno.EADDRINUSE:
                return None
            raise
        s.listen(2048)  # gunicorn's default backlog
        return s

    return wait_until(bound, f"127.0.0.1:{port} to be free to listen on")


def _started(
    argv: list[str], port: int, env: dict[str, str], log: Path, *, what: str, ca: str
) -> subprocess.Popen[bytes]:
    listener = _listening(port)
    # gunicorn takes the listening socket by its descriptor (fd://N) instead of binding the port
    argv = [f"fd://{listener.fileno()}" if a == f"127.0.0.1:{port}" else a for a in argv]
    try:
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv, env=env, stdout=out, stderr=out, start_new_session=True, pass_fds=(listener.fileno(),)
            )
    finally:
        listener.close()  # gunicorn holds it now
    url = f"{'https' if ca else 'http'}://127.0.0.1:{port}/healthz"

    def up_or_exited() -> bool:
        if proc.poll() is not None:
            return True
        try:
            return requests.get(url, timeout=5, verify=ca or True).status_code == 200
        except (requests.ConnectionError, requests.Timeout):  # workers still booting on a loaded machine
            return False

    with contextlib.suppress(AssertionError):
        wait_until(up_or_exited, f"{what} to answer {url}", interval=0.1)
    if proc.poll() is None and up_or_exited():
        return proc
    stop(proc)
    raise RuntimeError(f"{what} did not start; its log:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes], *, kill: bool = False) -> None:
    """SIGTERM (or SIGKILL) the whole process group and wait for it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

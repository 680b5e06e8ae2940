"""The native front (cmp_plugin/preload/front.c) is the Python caller without the interpreter.

Against a preload server stand-in that records what a caller sends (the real server is tested with
both callers in test_preload.py and test_preload_attacks.py): the same request, byte for byte,
for any environment; the same answer to every way a server can fail; the Python command for
everything the front does not handle.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmp_plugin.preload import protocol as preload
from tests.helpers import FRONT, PYTHON_CALLER, examples, run_cmp

from .conftest import ROOT, cmp_env

APP = "charts/platform"


@pytest.fixture(autouse=True)
def _no_server_left(no_preload_servers_left: None) -> None:
    """A server a fallback render starts is killed at the test's end (tests/cmp_plugin/conftest.py)."""


class Recorder:
    """A preload server stand-in: HELLO, read the request and its descriptors, then answer as told.

    ``answer``: "code" (READY, wait for GO, send ``code``), "silent" (accept, never say HELLO),
    "not-ready" (N after the request), "vanish" (close after GO without a code), "impostor" (the
    challenge-response without the key: what a process that took the socket's place can do).
    It keeps a key in the cache directory as the real server does, and proves it holds it with
    the stdlib's hmac (a reference for the front's own SHA-256 and the Python caller's HMAC).
    """

    def __init__(self, cache: Path, answer: str = "code", code: int = 7) -> None:
        cache.mkdir(mode=0o700, exist_ok=True)
        self.path = cache / preload.SOCKET_NAME
        self.answer, self.code = answer, code
        self.requests: list[dict[str, Any]] = []
        self.proofs: list[bool] = []
        self.connections = 0
        self.key = os.urandom(32)
        key = cache / preload.KEY_NAME
        key.unlink(missing_ok=True)
        key.touch(mode=0o600)
        key.write_bytes(self.key)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            if self.answer == "silent":
                self.held.append(conn)
                continue
            with conn:
                conn.settimeout(10)
                with contextlib.suppress(OSError):
                    self._serve(conn)

    def handshake(self, conn: socket.socket) -> bool:
        """The server's half of the challenge-response: whether the caller proved it holds the key."""
        server_nonce = os.urandom(preload.NONCE)
        conn.sendall(preload.HELLO + server_nonce)
        answer = b""
        while len(answer) < preload.NONCE + 32:
            chunk = conn.recv(preload.NONCE + 32 - len(answer))
            if not chunk:
                return False
            answer += chunk
        client = int.from_bytes(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)[:4], sys.byteorder)
        key = self.key if self.answer != "impostor" else os.urandom(32)

        def mac(side: bytes) -> bytes:
            pids = client.to_bytes(4, "big") + os.getpid().to_bytes(4, "big")
            message = side + b"\0" + server_nonce + answer[: preload.NONCE] + pids
            return hmac.new(key, message, hashlib.sha256).digest()

        self.proofs.append(hmac.compare_digest(answer[preload.NONCE :], mac(b"client")))
        conn.sendall(mac(b"server"))
        return self.proofs[-1]

    def _serve(self, conn: socket.socket) -> None:
        if not self.handshake(conn):
            return
        head, fds, _, _ = socket.recv_fds(conn, 65536, 8)
        size = int.from_bytes(head[:4], "big")
        body = head[4:]
        while len(body) < size:
            body += conn.recv(size - len(body))
        umask, pgid, env = preload.decode_request(body)
        info = [os.fstat(fd) for fd in fds]
        for fd in fds:
            os.close(fd)
        self.requests.append({"body": body, "umask": umask, "pgid": pgid, "env": env, "fds": info})
        if self.answer == "not-ready":
            conn.sendall(preload.NOT_READY)
            return
        conn.sendall(preload.READY)
        if conn.recv(1) != preload.GO:
            return
        if self.answer == "code":
            conn.sendall(bytes([self.code]))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()
        for conn in self.held:
            conn.close()
        self.path.unlink(missing_ok=True)


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[Any]:
    made: list[Recorder] = []

    def make(answer: str = "code", code: int = 7) -> Recorder:
        r = Recorder(tmp_path / f"cache-{len(made)}", answer, code)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def run(argv: list[str], cwd: Path, env: dict[Any, Any], **popen: Any) -> subprocess.CompletedProcess[str]:
    popen.setdefault("process_group", 0)  # argocd-cmp-server: Setpgid, same session
    return run_cmp(cwd, env, "generate", caller=argv, timeout=60, **popen)


def env_for(cache: Path, **extra: str) -> dict[str, str]:
    return {**cmp_env(APP), "DRIFTGUARD_CMP_CACHE_DIR": str(cache), "DRIFTGUARD_CMP_PRELOAD": "on", **extra}


def test_driftguard_cmp_is_the_native_front_and_the_python_command_is_beside_it() -> None:
    assert FRONT.read_bytes()[:4] == b"\x7fELF", "make setup installs the front (scripts/build_front.py)"
    assert FRONT.with_name("driftguard-cmp-py").read_text().startswith("#!")


def test_both_callers_send_the_same_request_and_exit_with_the_renders_code(recorder: Any, repo: Path) -> None:
    got = []
    for argv in (PYTHON_CALLER, [str(FRONT)]):
        r = recorder(code=7)
        env = env_for(r.path.parent, ARGOCD_ENV_TEAM="payments")
        proc = run(argv, repo / APP, env)
        assert (proc.returncode, proc.stdout, proc.stderr) == (7, "", "")
        (req,) = r.requests
        if argv == PYTHON_CALLER:
            # Python's own locale coercion (PEP 538) sets LC_CTYPE in its environment when the
            # locale is C; the front sends what Argo CD gave. No render reads it (process.tool_env).
            assert req["env"] == env or req["env"] == {**env, "LC_CTYPE": "C.UTF-8"}
        else:
            assert req["env"] == env
        cwd, fd_stat = os.stat(repo / APP), req["fds"][3]
        assert (fd_stat.st_dev, fd_stat.st_ino) == (cwd.st_dev, cwd.st_ino)
        assert all(stat.S_ISFIFO(s.st_mode) for s in req["fds"][1:3]), (
            "stdout and stderr: the command's pipes"
        )
        got.append(req)
    python, native = got
    assert native["umask"] == python["umask"] == _umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_both_callers_prove_they_hold_the_key_and_send_nothing_to_a_server_without_it(
    recorder: Any, repo: Path
) -> None:
    """Issue 27: a process in the socket's place that does not hold the key learns nothing.

    The caller answers the challenge, the impostor cannot answer the caller's: no environment
    (``ARGOCD_ENV_*`` values), no descriptors, and the render runs in-process, with its own output.
    Against the key holder the same callers' proofs check out with the stdlib's HMAC.
    """
    for argv in (PYTHON_CALLER, [str(FRONT)]):
        honest = recorder(code=7)
        assert run(argv, repo / APP, env_for(honest.path.parent)).returncode == 7
        assert honest.proofs == [True] and len(honest.requests) == 1
        impostor = recorder("impostor")
        proc = run(argv, repo / APP, env_for(impostor.path.parent, ARGOCD_ENV_DB_PASSWORD="hunter2"))
        assert proc.returncode == 0 and "kind:" in proc.stdout, proc.stderr  # rendered here
        assert impostor.connections == 1 and impostor.requests == [], "the caller sent its request"
        assert impostor.proofs == [False]


def test_a_caller_without_the_key_never_gets_a_server_to_send_anything(recorder: Any, repo: Path) -> None:
    """A missing or foreign key file: the caller cannot prove anything, and sends nothing."""
    for argv in (PYTHON_CALLER, [str(FRONT)]):
        r = recorder(code=7)
        key = r.path.parent / preload.KEY_NAME
        key.unlink()
        assert run(argv, repo / APP, env_for(r.path.parent)).returncode == 0
        key.write_bytes(r.key)
        key.chmod(0o644 | 0o020)  # writable by the group: not the server's
        assert run(argv, repo / APP, env_for(r.path.parent)).returncode == 0
        assert r.requests == [] and r.proofs == []


def test_the_request_names_the_callers_own_process_group(recorder: Any, repo: Path) -> None:
    r = recorder(code=0)
    proc = subprocess.Popen(
        [str(FRONT), "generate"], cwd=repo / APP, env=env_for(r.path.parent), process_group=0
    )
    assert proc.wait(60) == 0
    assert r.requests[0]["pgid"] == proc.pid


_NAME = st.binary(min_size=1, max_size=12).filter(lambda b: b"\0" not in b and b"=" not in b)
_VALUE = st.binary(max_size=40).filter(lambda b: b"\0" not in b)


@settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(extra=st.dictionaries(_NAME, _VALUE, max_size=8), umask=st.sampled_from([0o022, 0o077, 0o002, 0]))
def test_any_environment_crosses_byte_for_byte_as_python_sends_it(
    tmp_path_factory: pytest.TempPathFactory, extra: dict[bytes, bytes], umask: int
) -> None:
    """Any bytes a variable can hold (not UTF-8, '=' in a value, empty), in the order given."""
    base = tmp_path_factory.mktemp("any-env")
    bodies = []
    for argv in (PYTHON_CALLER, [str(FRONT)]):
        r = Recorder(base / "cache", "code", 0)  # the same path for both: it is in the request
        try:
            # a UTF-8 locale given, so Python coerces nothing (PEP 538) and both must send the same
            given = env_for(r.path.parent, LC_CTYPE="C.UTF-8")
            env: dict[bytes, bytes] = {os.fsencode(k): os.fsencode(v) for k, v in given.items()}
            env.update({k: v for k, v in extra.items() if k not in env})
            proc = run_cmp(base, env, "generate", caller=argv, timeout=60, text=False, umask=umask)
            assert proc.returncode == 0, proc.stderr
            (req,) = r.requests
            assert req["umask"] == umask
            assert {os.fsencode(k): os.fsencode(v) for k, v in req["env"].items()} == env
            bodies.append(req["body"].split(b"\0", 3)[3])
        finally:
            r.close()
    assert bodies[0] == bodies[1]


@pytest.mark.parametrize("argv", [PYTHON_CALLER, [str(FRONT)]], ids=["python", "native"])
def test_a_render_process_that_vanishes_after_go_is_an_error(
    recorder: Any, repo: Path, argv: list[str]
) -> None:
    r = recorder("vanish")
    proc = run(argv, repo / APP, env_for(r.path.parent))
    assert proc.returncode == 2
    assert proc.stderr == "driftguard: error: the preloaded render process ended without an exit code\n"


@pytest.mark.slow  # waits out a deadline per caller
@pytest.mark.parametrize("answer", ["silent", "not-ready"])
@pytest.mark.parametrize("argv", [PYTHON_CALLER, [str(FRONT)]], ids=["python", "native"])
def test_a_server_that_cannot_take_the_render_is_asked_once_then_the_render_runs_here(
    recorder: Any, repo: Path, argv: list[str], answer: str
) -> None:
    """No HELLO (2 s) or no READY: rendered in-process, and the native front's Python does not ask again."""
    r = recorder(answer)
    proc = run(argv, repo / APP, env_for(r.path.parent))
    assert proc.returncode == 0, proc.stderr
    assert "kind:" in proc.stdout
    assert r.connections == 1


def test_commands_other_than_generate_and_preload_off_are_pythons(repo: Path, tmp_path: Path) -> None:
    for args in (["plugin-yaml"], ["--help"]):
        native = run_cmp(None, None, *args, caller=[str(FRONT)], timeout=60)
        python = run_cmp(None, None, *args, caller=PYTHON_CALLER, timeout=60)
        assert (native.returncode, native.stdout, native.stderr) == (
            python.returncode,
            python.stdout,
            python.stderr,
        )
    native, python = (
        run(argv, repo / APP, env_for(tmp_path / name, DRIFTGUARD_CMP_PRELOAD="off"))
        for argv, name in (([str(FRONT)], "native"), (PYTHON_CALLER, "python"))
    )
    assert native.returncode == 0 and (native.stdout, native.stderr) == (python.stdout, python.stderr)
    assert not (tmp_path / "native" / preload.SOCKET_NAME).exists()


def test_an_environment_python_reads_differently_is_left_to_python(recorder: Any, repo: Path) -> None:
    """A name given twice (Python keeps the first) or an entry without '=': Python's caller sends it.

    Built with execve directly: no Python mapping can hold either.
    """
    r = recorder(code=0)
    env = env_for(r.path.parent)
    envp = [f"{k}={v}" for k, v in env.items()] + [
        "ARGOCD_ENV_TEAM=first",
        "ARGOCD_ENV_TEAM=second",
        "NOEQUALS",
    ]
    script = (
        "import ctypes, os, sys\n"
        "envp = (ctypes.c_char_p * (len(sys.argv) - 1))(*[os.fsencode(a) for a in sys.argv[2:]], None)\n"
        "argv = (ctypes.c_char_p * 3)(os.fsencode(sys.argv[1]), b'generate', None)\n"
        "ctypes.CDLL(None, use_errno=True).execve(os.fsencode(sys.argv[1]), argv, envp)\n"
        "sys.exit('execve failed')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(FRONT), *envp],
        cwd=repo / APP,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        process_group=0,
    )
    assert proc.returncode == 0, proc.stderr
    assert r.connections == 1
    assert r.requests[0]["env"]["ARGOCD_ENV_TEAM"] == "first"
    assert "NOEQUALS" not in r.requests[0]["env"]


def test_no_server_yet_starts_one_through_python(repo: Path, tmp_path: Path) -> None:
    """No cache directory, no socket: Python creates both (the front never creates anything)."""
    cache = tmp_path / "cache"
    first = run([str(FRONT)], repo / APP, env_for(cache))
    assert first.returncode == 0, first.stderr
    assert (cache / preload.SOCKET_NAME).exists() or (cache / preload.STARTING).exists()


@pytest.mark.parametrize("argv", [PYTHON_CALLER, [str(FRONT)]], ids=["python", "native"])
@pytest.mark.parametrize("variable", ["TMPDIR", "DRIFTGUARD_CMP_CACHE_DIR"])
def test_a_relative_cache_or_temp_directory_is_refused_not_read_from_the_checkout(
    recorder: Any, repo: Path, argv: list[str], variable: str
) -> None:
    """Relative paths resolve against the checkout: a planted socket or launch plan would be the plugin's own."""
    r = recorder(code=7)
    planted = repo / APP / "tt" / "driftguard"
    planted.mkdir(parents=True, mode=0o700)
    (planted / preload.SOCKET_NAME).symlink_to(r.path)  # the tenant's socket, pointing at a listener
    env = env_for(r.path.parent)
    del env["DRIFTGUARD_CMP_CACHE_DIR"]
    env[variable] = "tt/driftguard" if variable == "DRIFTGUARD_CMP_CACHE_DIR" else "tt"
    proc = run(argv, repo / APP, env)
    assert proc.returncode == 2, proc.stderr
    assert f"{variable}: must be an absolute path" in proc.stderr
    assert r.connections == 0, r.connections


@pytest.mark.parametrize("closed", [0, 1, 2])
def test_a_closed_standard_stream_is_never_replaced_by_the_socket(
    recorder: Any, repo: Path, closed: int
) -> None:
    """The socket would take the closed number and go to the render as its stdin, stdout or stderr."""
    results = []
    for argv in (PYTHON_CALLER, [str(FRONT)]):
        r = recorder(code=7)
        script = f"import os, sys; os.close({closed}); os.execv(sys.argv[1], sys.argv[1:])"
        proc = subprocess.run(
            [sys.executable, "-c", script, *argv, "generate"],
            cwd=repo / APP,
            env=env_for(r.path.parent),
            capture_output=True,
            timeout=60,
            check=False,
            process_group=0,
        )
        assert r.connections == 0, "the render went to the server with a stream missing"
        results.append(proc.returncode)
    assert results[0] == results[1]


class DripRecorder(Recorder):
    """Says HELLO, then reads the request 64 KiB every 1.5 s: a caller must give up within its 2 s."""

    def _serve(self, conn: socket.socket) -> None:
        if not self.handshake(conn):
            return
        while not self.stop.wait(1.5):
            if not conn.recv(65536):
                return
        conn.sendall(preload.READY)


@pytest.mark.slow  # waits out a deadline per caller
@pytest.mark.parametrize("argv", [PYTHON_CALLER, [str(FRONT)]], ids=["python", "native"])
def test_the_request_is_sent_within_one_deadline_or_the_render_runs_here(
    tmp_path: Path, repo: Path, argv: list[str]
) -> None:
    r = DripRecorder(tmp_path / "cache")
    try:
        env = env_for(r.path.parent, ARGOCD_ENV_BULK="x" * 100_000, ARGOCD_ENV_BULK2="y" * 100_000)
        proc = run(argv, repo / APP, env)
        assert proc.returncode == 0, proc.stderr  # rendered in-process, not 7 from the server
        assert "kind:" in proc.stdout
    finally:
        r.close()


def test_a_cache_directory_with_a_trailing_slash_is_the_same_socket(recorder: Any, repo: Path) -> None:
    for argv in (PYTHON_CALLER, [str(FRONT)]):
        r = recorder(code=7)
        proc = run(argv, repo / APP, env_for(r.path.parent, DRIFTGUARD_CMP_CACHE_DIR=f"{r.path.parent}/"))
        assert proc.returncode == 7 and r.connections == 1


def test_a_stderr_nobody_reads_is_no_death_by_sigpipe(recorder: Any, repo: Path) -> None:
    r = recorder("vanish")
    read, write = os.pipe()
    os.close(read)
    try:
        proc = run_cmp(
            repo / APP,
            env_for(r.path.parent),
            "generate",
            caller=[str(FRONT)],
            timeout=60,
            stdout=subprocess.DEVNULL,
            stderr=write,
            process_group=0,
        )
    finally:
        os.close(write)
    assert proc.returncode == 2


def test_the_front_never_execs_itself(tmp_path: Path) -> None:
    """Its Python command is built in; one that is no script (the front itself: a loop) is an error."""
    import importlib.util
    import shutil

    spec = importlib.util.spec_from_file_location("build_front", ROOT / "scripts" / "build_front.py")
    assert spec is not None and spec.loader is not None
    build_front = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_front)

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "driftguard-cmp-py"
    script.write_text('#!/bin/sh\necho python-command "$@"\n')
    script.chmod(0o755)
    assert build_front.main([str(bin_dir)]) == 0
    front = bin_dir / "driftguard-cmp"
    ok = subprocess.run([str(front), "plugin-yaml"], capture_output=True, text=True, timeout=30, check=False)
    assert ok.stdout == "python-command plugin-yaml\n"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(front, elsewhere / "driftguard-cmp")  # a copy still finds the built-in command
    copied = subprocess.run(
        [str(elsewhere / "driftguard-cmp"), "x"], capture_output=True, text=True, timeout=30, check=False
    )
    assert copied.stdout == "python-command x\n"
    script.unlink()
    script.symlink_to(front)
    loop = subprocess.run(
        [str(front), "plugin-yaml"], capture_output=True, text=True, timeout=30, check=False
    )
    assert loop.returncode == 2
    assert "driftguard-cmp-py is not pip's Python script" in loop.stderr


@pytest.mark.parametrize(
    "opened",
    ["DRIFTGUARD_CMP_TOOL_READ_PATHS", "DRIFTGUARD_CMP_TOOL_WRITE_PATHS", "SSL_CERT_DIR", "helm's directory"],
)
def test_a_cache_a_tool_may_reach_is_never_used_by_either_caller(
    recorder: Any, repo: Path, tmp_path: Path, opened: str
) -> None:
    """A key and a socket there could be a tool's (sandbox.reaches): neither caller even connects.

    The opened directory is named through a symlink: the check is on what it resolves to, as the
    sandbox's rules are (a rule holds the directory an opened descriptor names).
    """
    r = recorder(code=7)
    link = tmp_path.parent / f"{tmp_path.name}-link"
    link.symlink_to(tmp_path)
    try:
        if opened == "helm's directory":  # a wrapper beside the cache: its directory is open to it
            helm = tmp_path / "helm"
            helm.write_text(f"#!/bin/sh\nexec '{os.environ['DRIFTGUARD_HELM']}' \"$@\"\n")
            helm.chmod(0o755)
            extra = {"DRIFTGUARD_HELM": str(link / "helm")}
        elif opened == "SSL_CERT_DIR":  # one path (sandbox.py), not a list
            extra = {opened: str(link)}
        else:
            extra = {opened: f"{cmp_env(APP)['DRIFTGUARD_CMP_TOOL_READ_PATHS']}:{link}"}
        for argv in (PYTHON_CALLER, [str(FRONT)]):
            proc = run(argv, repo / APP, env_for(r.path.parent, **extra))
            assert proc.returncode == 0 and "kind:" in proc.stdout, proc.stderr  # rendered in-process
        assert r.connections == 0, r.connections
        control = run([str(FRONT)], repo / APP, env_for(r.path.parent))
        assert control.returncode == 7 and r.connections == 1, "without the opening, the front connects"
    finally:
        link.unlink()

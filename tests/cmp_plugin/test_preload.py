"""The preload server: a forked, preloaded ``generate`` is the same render, in the caller's process group.

Every test runs the real console entry, both ways it is installed (``python -m cmp_plugin generate``
and the native front cmp_plugin/preload/front.c, the image's ``driftguard-cmp``), the way argocd-cmp-server
does: in a process group of its own within the same session (``Setpgid``), and kills that group
when it is done with the command. The helm wrapper logs who started it and in which group.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cmp_plugin.preload import protocol as preload
from cmp_plugin.preload import server
from driftguard import env as dg_env
from tests.helpers import start_cmp, wait_until

from .conftest import cmp_env, preload_servers

APP = "charts/platform"


class Run:
    def __init__(self, proc: subprocess.Popen[str], out: str, err: str) -> None:
        self.pid, self.returncode, self.stdout, self.stderr = proc.pid, proc.returncode, out, err


@pytest.fixture(autouse=True)
def _no_server_left(no_preload_servers_left: None) -> None:
    """Every server a test here starts is killed at its end (tests/cmp_plugin/conftest.py)."""


@pytest.fixture
def cache(repo: Path) -> Iterator[Path]:
    path = repo.parent / "cache"
    yield path
    pid = server_pid(path)
    if pid:  # it answered a moment ago: it may have stopped since (a test's own kill, a replaced socket)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    (path / preload.SOCKET_NAME).unlink(missing_ok=True)


@pytest.fixture
def helm_log(tmp_path: Path) -> Path:
    """Beside the cache, not above it: a cache a tool may write is never the server's (sandbox.reaches)."""
    (tmp_path / "tool-log").mkdir(exist_ok=True)
    return tmp_path / "tool-log" / "helm-starts.jsonl"


def wrapper(tmp_path: Path, log: Path) -> Path:
    """A helm that logs its pid, parent and process group, then becomes the real helm.

    It first sleeps ARGOCD_ENV_HELM_SLEEP seconds when the render has that per-app variable (a
    per-app variable, so the sidecar's settings stay the server's and the render is preloaded).
    """
    (tmp_path / "tool").mkdir(exist_ok=True)  # its directory is open to tools: not the cache's
    path = tmp_path / "tool" / "helm"
    path.write_text(
        "#!/bin/sh\n"
        f'printf \'{{"pid": %s, "ppid": %s, "pgid": %s}}\\n\' "$$" "$PPID" '
        f"\"$(cut -d' ' -f5 /proc/$$/stat)\" >> '{log}'\n"
        '[ -n "$ARGOCD_ENV_HELM_SLEEP" ] && sleep "$ARGOCD_ENV_HELM_SLEEP"\n'
        + f"exec '{os.environ['DRIFTGUARD_HELM']}' \"$@\"\n"
    )
    path.chmod(0o755)
    return path


def starts(log: Path) -> list[dict[str, int]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def server_pid(cache: Path) -> int:
    """The preload server's pid, from the socket's peer credentials; 0 when none answers."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(cache / preload.SOCKET_NAME))
        return int.from_bytes(s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)[:4], sys.byteorder)
    except OSError:
        return 0
    finally:
        s.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for every purpose here
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.fixture
def start(
    repo: Path, cache: Path, tmp_path: Path, helm_log: Path, caller: list[str]
) -> Callable[..., subprocess.Popen[str]]:
    def run(
        params: list[dict[str, Any]] | None = None,
        *,
        preload_value: str = "on",
        sleep: int = 0,
        extra: dict[str, str] | None = None,
        **popen: Any,
    ) -> subprocess.Popen[str]:
        env = {
            **cmp_env(
                APP, params, **(extra or {}), **({"ARGOCD_ENV_HELM_SLEEP": str(sleep)} if sleep else {})
            ),
            "DRIFTGUARD_CMP_CACHE_DIR": str(cache),
            "DRIFTGUARD_HELM": str(wrapper(tmp_path, helm_log)),
            # the instrumented helm logs beside the test (the sandbox lets a tool write nowhere else)
            "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": str(helm_log.parent),
            "DRIFTGUARD_CMP_PRELOAD": preload_value,
            # each render starts its helm: these tests count who started it (the render cache's
            # hits are tests/cmp_plugin/test_render_cache.py's)
            "DRIFTGUARD_CMP_RENDER_CACHE_BYTES": "0",
        }
        popen.setdefault("process_group", 0)  # argocd-cmp-server: Setpgid, same session
        return start_cmp(
            repo / APP,
            env,
            "generate",
            caller=caller,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **popen,
        )

    return run


@pytest.fixture
def generate(start: Callable[..., subprocess.Popen[str]]) -> Callable[..., Run]:
    def run(*args: Any, **kwargs: Any) -> Run:
        proc = start(*args, **kwargs)
        out, err = proc.communicate(timeout=120)
        return Run(proc, out, err)

    return run


def served(cache: Path) -> int:
    return int(wait_until(lambda: server_pid(cache), "the preload server answers"))


def test_a_preloaded_render_is_the_same_render_in_the_callers_group(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    off = generate(preload_value="off")
    assert off.returncode == 0, off.stderr
    first = generate()  # renders itself and starts the server
    assert first.returncode == 0, first.stderr
    assert starts(helm_log)[-1]["ppid"] == first.pid
    served(cache)
    second = generate()
    assert second.returncode == 0, second.stderr
    helm = starts(helm_log)[-1]
    assert helm["ppid"] != second.pid, "the render ran in the caller, not in a preloaded child"
    assert helm["pgid"] == second.pid, "the preloaded render left the command's process group"
    assert second.stdout == first.stdout == off.stdout
    assert second.stderr == first.stderr


def test_exit_code_and_messages_come_back_from_the_preloaded_render(
    generate: Callable[..., Run], cache: Path
) -> None:
    bad = [{"name": "no-such-parameter", "string": "x"}]
    off = generate(bad, preload_value="off")
    assert off.returncode == 2 and "no-such-parameter" in off.stderr
    assert generate().returncode == 0
    served(cache)
    on = generate(bad)
    assert (on.returncode, on.stdout, on.stderr) == (off.returncode, off.stdout, off.stderr)


def test_killing_the_commands_group_stops_the_preloaded_render_and_its_tools(
    generate: Callable[..., Run],
    start: Callable[..., subprocess.Popen[str]],
    cache: Path,
    helm_log: Path,
) -> None:
    assert generate().returncode == 0
    server = served(cache)
    before = len(starts(helm_log))
    proc = start(sleep=60)  # a helm that hangs
    helm = wait_until(lambda: starts(helm_log)[before:], "the slow helm starts")[0]
    assert helm["ppid"] != proc.pid and helm["pgid"] == proc.pid
    os.killpg(proc.pid, signal.SIGKILL)  # what argocd-cmp-server does after a command or its timeout
    proc.communicate(timeout=30)
    wait_until(lambda: not alive(helm["pid"]) and not alive(helm["ppid"]), "the render and its helm are gone")
    assert alive(server), "the server is not in the command's group: it serves the next render"
    assert generate().returncode == 0


def test_the_server_holds_nothing_of_an_application(
    generate: Callable[..., Run], cache: Path, repo: Path
) -> None:
    run = generate(
        [{"name": "values-files", "array": ["values.yaml"]}], extra={"ARGOCD_ENV_TEAM": "payments"}
    )
    assert run.returncode == 0, run.stderr
    server = served(cache)
    environ = Path(f"/proc/{server}/environ").read_bytes().split(b"\0")
    names = {item.partition(b"=")[0] for item in environ}
    assert not {n for n in names if n.startswith((b"ARGOCD_", b"PARAM_"))}
    assert b"KUBE_VERSION" not in names and b"KUBE_API_VERSIONS" not in names
    assert os.readlink(f"/proc/{server}/cwd") == "/"
    assert os.getpgid(server) != run.pid


@pytest.mark.slow  # waits out a deadline per caller
def test_a_socket_that_never_answers_costs_a_wait_then_an_ordinary_render(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    cache.mkdir(mode=0o700)
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squatter.bind(str(cache / preload.SOCKET_NAME))
    squatter.listen(8)  # accepts into the backlog, never answers
    try:
        run = generate()
        assert run.returncode == 0, run.stderr
        assert starts(helm_log)[-1]["ppid"] == run.pid
        assert run.stdout.startswith("---") or "kind:" in run.stdout
    finally:
        squatter.close()


def test_a_file_in_the_sockets_place_is_replaced_by_a_server(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    cache.mkdir(mode=0o700)
    (cache / preload.SOCKET_NAME).write_text("not a socket")
    first = generate()
    assert first.returncode == 0, first.stderr
    assert starts(helm_log)[-1]["ppid"] == first.pid
    served(cache)
    second = generate()
    assert second.returncode == 0 and second.stdout == first.stdout
    assert starts(helm_log)[-1]["ppid"] != second.pid


def test_a_cache_directory_others_can_write_means_no_preloading(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    cache.mkdir()
    cache.chmod(0o777)  # anyone could plant a socket there and be handed the render's environment
    for _ in range(2):
        run = generate()
        assert run.returncode == 0, run.stderr
        assert starts(helm_log)[-1]["ppid"] == run.pid
        # a start leaves its marker (or, once the server listens, the socket) before generate returns
        started = [n for n in (preload.STARTING, preload.SOCKET_NAME) if (cache / n).exists()]
        assert not started and not preload_servers(cache), "a server started in a directory others can write"


def test_a_caller_in_another_session_renders_itself(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    first = generate()
    served(cache)
    other = generate(process_group=None, start_new_session=True)
    assert other.returncode == 0, other.stderr
    assert starts(helm_log)[-1]["ppid"] == other.pid, "a child that cannot join the group must not render"
    assert other.stdout == first.stdout


def waiting_children(server: int) -> list[int]:
    """The server's live children: the one forked ahead, waiting for the next render."""
    try:
        pids = [int(p) for p in Path(f"/proc/{server}/task/{server}/children").read_text().split()]
    except OSError:
        return []
    return [p for p in pids if alive(p)]


ACCEPT4 = {"x86_64": 288, "aarch64": 242}[platform.machine()]
"""The syscall a child forked ahead waits in (Python's socket.accept on Linux)."""


def in_accept(pid: int) -> bool:
    """Asleep in accept4(): waiting for a connection (a child woken by one is running, or reading)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
        return state == "S" and int(Path(f"/proc/{pid}/syscall").read_text().split()[0]) == ACCEPT4
    except (OSError, IndexError, ValueError):  # gone, or running ("running" instead of a number)
        return False


def settled_child(server: int) -> int:
    """The one child waiting once the one that served ``served()``'s probe has gone.

    The probe's connect() woke the child that takes it before it returned, so once ``served()``
    has returned only the child forked ahead of the next render sleeps in accept().
    """

    def one() -> int:
        found = waiting_children(server)
        return found[0] if len(found) == 1 and in_accept(found[0]) else 0

    return int(wait_until(one, "one child forked ahead"))


def test_removing_the_socket_stops_the_server(generate: Callable[..., Run], cache: Path) -> None:
    assert generate().returncode == 0
    server = served(cache)
    waiting = settled_child(server)
    (cache / preload.SOCKET_NAME).unlink()
    wait_until(lambda: not alive(server), "the server exits")
    wait_until(lambda: not alive(waiting), "so does the child it forked ahead")


def test_a_key_another_server_wrote_over_ours_is_put_back(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    """Two servers started at once: the one that keeps the socket may find the other's key.

    Until it puts its own back, no caller can prove anything to it (each renders in-process).
    """
    assert generate().returncode == 0
    server = served(cache)
    key = cache / preload.KEY_NAME
    ours = key.read_bytes()
    (cache / "other.tmp").write_bytes(os.urandom(32))
    (cache / "other.tmp").chmod(0o600)
    os.replace(cache / "other.tmp", key)
    unproven = generate()
    assert unproven.returncode == 0 and starts(helm_log)[-1]["ppid"] == unproven.pid, "in-process"
    wait_until(lambda: key.read_bytes() == ours, "the server puts its key back")
    run = generate()
    assert run.returncode == 0 and starts(helm_log)[-1]["ppid"] != run.pid, "preloaded again"
    assert served(cache) == server


def test_a_child_is_forked_ahead_of_each_render(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    """The fork (~2.5 ms for the server) happens while no render waits: one child always waits in accept."""
    assert generate().returncode == 0
    server = served(cache)  # a connection of its own: the child that took it exits, another is forked
    first = settled_child(server)
    run = generate()
    assert run.returncode == 0, run.stderr
    helm = starts(helm_log)[-1]
    assert helm["ppid"] == first, "the render ran in the child that was waiting"
    (second,) = wait_until(lambda: [p for p in waiting_children(server) if p != first], "the next one")
    assert second != first


def test_an_invalid_setting_is_reported_by_the_render(generate: Callable[..., Run], cache: Path) -> None:
    run = generate(preload_value="sometimes")
    assert run.returncode == 2
    assert "DRIFTGUARD_CMP_PRELOAD" in run.stderr
    assert not cache.joinpath(preload.SOCKET_NAME).exists()


def test_the_preload_words_are_the_settings_words() -> None:
    assert preload.TRUE == dg_env._TRUE


@given(
    st.dictionaries(
        st.text(st.characters(blacklist_characters="\0=", blacklist_categories=["Cs"]), min_size=1),
        st.text(st.characters(blacklist_characters="\0", blacklist_categories=["Cs"])),
        max_size=20,
    ),
    st.integers(0, 0o777),
    st.integers(1, 2**22),
)
def test_every_environment_crosses_the_socket_unchanged(env: dict[str, str], umask: int, pgid: int) -> None:
    framed = preload.encode_request(umask, pgid, env)
    assert int.from_bytes(framed[:4], "big") == len(framed) - 4
    assert preload.decode_request(framed[4:]) == (umask, pgid, env)


@pytest.mark.parametrize(
    "body", [b"", b"GET / HTTP/1.1", preload.MAGIC + b"\0x", preload.MAGIC + b"\0022\0001\0NOEQUALS"]
)
def test_a_malformed_request_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError):
        preload.decode_request(body)


def test_a_changed_module_file_is_noticed(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("x = 1\n")
    files = {str(f): f.stat().st_mtime_ns}
    assert not server._changed(files)
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 1))
    assert server._changed(files)
    f.unlink()
    assert server._changed(files)


def test_a_caller_with_other_settings_is_never_served_by_a_child(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    """A child takes only the per-app variables from a caller; other settings: the caller renders itself.

    The first render starts the server with a setting the settings refuse; a render without it
    renders in its own process (a child would run unconfined with settings a connecting tool
    chose), and sees its own environment either way.
    """
    bad = {"DRIFTGUARD_CMP_MAX_MEMORY": "lots"}
    first = generate(extra=bad)
    assert first.returncode == 2 and "DRIFTGUARD_CMP_MAX_MEMORY" in first.stderr
    server = served(cache)
    assert b"DRIFTGUARD_CMP_MAX_MEMORY=lots" in Path(f"/proc/{server}/environ").read_bytes().split(b"\0")
    clean = generate()
    assert clean.returncode == 0, clean.stderr
    assert starts(helm_log)[-1]["ppid"] == clean.pid, "rendered in-process, not by the server's child"
    again = generate(extra=bad)
    assert (again.returncode, again.stderr) == (first.returncode, first.stderr)


def test_a_caller_with_the_servers_settings_is_served_with_its_own_app_variables(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    """Per-app variables (ARGOCD_APP_*, ARGOCD_ENV_*, PARAM_*) do cross: that is every real render."""
    assert generate().returncode == 0
    served(cache)
    run = generate(extra={"ARGOCD_ENV_EXTRA": "x"})
    assert run.returncode == 0, run.stderr
    assert starts(helm_log)[-1]["ppid"] != run.pid, "preloaded"


def test_a_stuck_child_is_replaced_and_the_render_still_preloaded(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    """A child forked ahead that does not take a waiting connection (stopped) is replaced within STALL."""
    assert generate().returncode == 0
    server = served(cache)
    stuck = settled_child(server)
    os.kill(stuck, signal.SIGSTOP)
    # stopped for certain before the render connects (else it may take the connection, then stop)
    wait_until(lambda: Path(f"/proc/{stuck}/stat").read_text().split(") ", 1)[1][0] == "T", "stopped")
    run = generate()
    assert run.returncode == 0, run.stderr
    assert starts(helm_log)[-1]["ppid"] not in (run.pid, stuck), "served by a new child"
    wait_until(lambda: not alive(stuck), "the stuck child is gone")
    assert alive(server)


def test_a_child_whose_server_died_serves_nothing(
    generate: Callable[..., Run], cache: Path, helm_log: Path
) -> None:
    """It would hold the listener for ever (nobody may connect again): it dies with its server."""
    assert generate().returncode == 0
    server = served(cache)
    orphan = settled_child(server)
    os.kill(server, signal.SIGKILL)
    wait_until(lambda: not alive(server), "the server is gone")
    wait_until(lambda: not alive(orphan), "the child forked ahead dies with it")
    run = generate()  # finds nobody listening: starts a server, renders itself
    assert run.returncode == 0, run.stderr
    assert starts(helm_log)[-1]["ppid"] == run.pid, "rendered in-process"
    wait_until(lambda: server_pid(cache) not in (0, server), "a new server")
    again = generate()
    assert again.returncode == 0 and starts(helm_log)[-1]["ppid"] != again.pid


def test_a_server_whose_socket_is_gone_stops_even_while_its_children_die(
    generate: Callable[..., Run], cache: Path
) -> None:
    assert generate().returncode == 0
    server = served(cache)
    settled_child(server)
    (cache / preload.SOCKET_NAME).unlink()

    def stopped() -> bool:
        for child in waiting_children(server):
            # each one "gone" without a connection; the server may have killed it itself since
            # it was listed (it does so on the way out), and the kernel reaps it at once
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        return not alive(server)

    wait_until(stopped, "the server to notice its socket is gone (not re-forking for ever)")


@given(st.binary(min_size=0, max_size=100), st.binary(max_size=300))
def test_the_callers_mac_is_hmac_sha256(key: bytes, message: bytes) -> None:
    """preload.mac (over _sha256 alone, to keep hashlib off the caller's path) is RFC 2104's."""
    import hashlib
    import hmac

    assert preload.mac(key, message) == hmac.new(key, message, hashlib.sha256).digest()


@given(
    st.binary(min_size=32, max_size=32),
    st.binary(min_size=preload.NONCE, max_size=preload.NONCE),
    st.binary(min_size=preload.NONCE, max_size=preload.NONCE),
    st.integers(1, 2**22),
    st.integers(1, 2**22),
    st.sampled_from(["side", "server_nonce", "client_nonce", "client", "server", "key"]),
)
def test_a_proof_is_worth_nothing_on_another_connection(
    key: bytes, server_nonce: bytes, client_nonce: bytes, client: int, server: int, change: str
) -> None:
    """Changing any one input (a relayed connection has other pids; a replay other nonces) changes it."""
    args: dict[str, Any] = {
        "key": key,
        "side": b"client",
        "server_nonce": server_nonce,
        "client_nonce": client_nonce,
        "client": client,
        "server": server,
    }
    other = dict(args)
    value = other[change]
    other[change] = (
        b"server"
        if change == "side"
        else value + 1
        if isinstance(value, int)
        else bytes([value[0] ^ 1]) + value[1:]
    )
    assert preload.proof(**args) != preload.proof(**other)

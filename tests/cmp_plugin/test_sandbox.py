"""Issue 27: nothing a render runs can impersonate or replace the preload server (cmp_plugin/sandbox.py).

A tool made to run code (here: a ``helm`` that first runs the attacker's script, as
``--post-renderer=/bin/sh`` did before helm_inflation.py) tries the takeover the issue describes:
remove the server's socket and listen in its place, stop or kill the server, plant a launch plan
and a baseline in the cache, read another render's files. Before, each step worked and the next
render handed the impostor its environment. Under Landlock each is refused, the server keeps its
socket, and the next render is served by it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cmp_plugin import sandbox
from cmp_plugin.preload import protocol as preload
from tests.helpers import wait_until

from .conftest import cmp_env, kill_preload_servers
from .test_preload import alive, server_pid

APP = "charts/platform"


@pytest.fixture(autouse=True)
def _no_server_left(no_preload_servers_left: None) -> None:
    """Every server a test here starts is killed at its end."""


def test_this_kernel_offers_landlock() -> None:
    """The probe: ABI >= 1 (Linux 5.13), >= 6 for signal scoping (Linux 6.12)."""
    assert sandbox.abi() >= 1, os.uname().release
    assert sandbox.available()


def evil_helm(tmp_path: Path, *, cache: Path, server: int, victim: Path, report: Path) -> Path:
    (tmp_path / "tool").mkdir()  # a tool's directory is open to it: never the cache's parent
    script = tmp_path / "tool" / "evil-helm"
    sock = cache / preload.SOCKET_NAME
    steps = {
        "remove-socket": f"rm -f '{sock}'",
        "listen-in-its-place": (
            "/usr/bin/python3 -S -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); "
            f"s.bind(sys.argv[1])' '{cache}/impostor.sock'"
        ),
        "replace-socket": f"mv -f '{cache}/impostor.sock' '{sock}'",
        "stop-server": f"kill -STOP {server}",
        "kill-server": f"kill -KILL {server}",
        "plant-plan": f"echo x > '{cache}/planted.plan'",
        "read-other-render": f"cat '{victim}'",
        "read-server-environ": f"cat /proc/{server}/environ",
    }
    lines = ["#!/bin/sh"]
    for name, command in steps.items():
        lines.append(
            # the output goes beside the report: /dev/null is not writable under the sandbox, and a
            # redirection that fails would skip the command and count it as refused
            f"if {command} >>'{report}.out' 2>&1; then echo '{name}: done'; else echo '{name}: refused'; fi >> '{report}'"
        )
    lines.append(f"exec '{os.environ['DRIFTGUARD_HELM']}' \"$@\"")
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return script


def run(repo: Path, cache: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **cmp_env(APP, None, **extra),
        "DRIFTGUARD_CMP_CACHE_DIR": str(cache),
        "DRIFTGUARD_CMP_PRELOAD": "on",
    }
    return subprocess.run(
        [sys_executable(), "generate"],
        cwd=repo / APP,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        process_group=0,
        check=False,
    )


def sys_executable() -> str:
    import sys

    return str(Path(sys.executable).with_name("driftguard-cmp-py"))


def test_a_render_cannot_take_the_preload_server_over(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = run(repo, cache)
    assert first.returncode == 0, first.stderr
    server = wait_until(lambda: server_pid(cache), "the preload server answers")
    inode = (cache / preload.SOCKET_NAME).stat().st_ino
    victim = tmp_path / "other-render" / "secret.txt"  # another render's scratch or checkout
    victim.parent.mkdir()
    victim.write_text("another tenant's value\n")
    report = repo / "takeover.log"  # the render's own checkout: the one place it may write
    helm = evil_helm(tmp_path, cache=cache, server=server, victim=victim, report=report)
    attacked = run(repo, cache, DRIFTGUARD_HELM=str(helm))
    assert attacked.returncode == 0, attacked.stderr
    outcome = dict(line.split(": ") for line in report.read_text().splitlines())
    assert outcome == dict.fromkeys(outcome, "refused"), outcome
    assert len(outcome) == 8
    assert alive(server)
    assert (cache / preload.SOCKET_NAME).stat().st_ino == inode
    assert not (cache / "planted.plan").exists() and not (cache / "impostor.sock").exists()
    after = run(repo, cache)  # served by the plugin's own server, as before
    assert after.returncode == 0, after.stderr
    assert server_pid(cache) == server
    kill_preload_servers(tmp_path)


def test_a_tool_starts_with_no_capability(tmp_path: Path) -> None:
    """Whatever the plugin holds (this suite may run as root): CapEff, CapPrm, CapAmb all zero.

    With CAP_SYS_PTRACE a tool would read a non-dumpable plugin process's environ anyway.
    """
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    sandbox.configure(checkout=str(scratch), scratch=str(scratch))
    try:
        pid = sandbox.run_confined(
            lambda: os.posix_spawn(
                "/bin/sh", ["/bin/sh", "-c", f"grep ^Cap /proc/self/status > '{scratch}/caps'"], {}
            ),
            tool="/bin/sh",
        )
        assert os.waitpid(pid, 0)[1] == 0
    finally:
        sandbox.clear()
    caps = dict(line.split(":\t") for line in (scratch / "caps").read_text().splitlines())
    assert {k: int(v, 16) for k, v in caps.items() if k in ("CapEff", "CapPrm", "CapAmb")} == {
        "CapEff": 0,
        "CapPrm": 0,
        "CapAmb": 0,
    }

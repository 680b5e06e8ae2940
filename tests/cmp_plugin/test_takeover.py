"""Issue 27: the preload takeover, run from inside a preloaded render, fails at every step.

The real preload server, the real callers (pip's Python script and the native front), the real
Landlock sandbox. The tenant's chart carries code (``attack.py``, tests/cmp_plugin/hostile_tool.py)
and the platform's helm here runs it, as a tool made to run code would (a post-renderer before
helm_inflation.py, a template-engine bug). While another tenant's render waits in its helm, the
code tries everything the takeover needs: ask the server for a render without the key, read the
key, replace the socket, plant a launch plan or a cache entry, read the plugin's and the server's
environment and memory, stop or kill the server, and dump every /proc environ and cmdline it can.
On the branch's base the forged request was served (same uid was the only check: exit 0, a render
as Application "victim") and the dump held the other tenant's ``ARGOCD_ENV_*`` secret (Landlock
refuses a tool ptrace attach, not the read /proc/<pid>/environ needs). Now each step is refused, nothing it could read holds the key or another
tenant's secret, and both renders come out as they do without it, served by the same server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from cmp_plugin import launch, sandbox
from cmp_plugin.preload import protocol as preload
from tests.helpers import wait_until

from .conftest import HERE, cmp_env
from .test_preload import alive, server_pid, starts

APP = "charts/platform"
STEPS = {
    "request-a-render",
    "read-key",
    "list-cache",
    "remove-socket",
    "replace-socket",
    "write-launch-plan",
    "write-cache",
    "read-plugin-environ",
    "read-plugin-memory",
    "read-server-environ",
    "read-server-memory",
    "stop-server",
    "kill-server",
}


@pytest.fixture(autouse=True)
def _no_server_left(no_preload_servers_left: None) -> None:
    """Every server a test here starts is killed at its end (tests/cmp_plugin/conftest.py)."""


def platform_helm(tmp_path: Path, cache: Path, log: Path) -> Path:
    """The sidecar's helm: logs its start, waits when told (a render in flight), runs a chart's code."""
    tool = tmp_path / "tool"
    tool.mkdir()
    helm = tool / "helm"
    helm.write_text(
        "#!/bin/sh\n"
        f'printf \'{{"pid": %s, "ppid": %s}}\\n\' "$$" "$PPID" >> \'{log}/starts.jsonl\'\n'
        'if [ -f "$2/wait-for-attack" ]; then\n'
        f"  : > '{log}/victim-waiting'; i=0\n"
        f"  while [ ! -e '{log}/takeover.json' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
        "fi\n"
        f"[ -f \"$2/attack.py\" ] && /usr/bin/python3 -S \"$2/attack.py\" '{cache}' '{log}'\n"
        f"exec '{os.environ['DRIFTGUARD_HELM']}' \"$@\"\n"
    )
    helm.chmod(0o755)
    return helm


def test_a_tool_running_the_tenants_code_cannot_take_the_preload_server_over(
    repo: Path, tmp_path: Path, caller: list[str]
) -> None:
    assert sandbox.available(), "Landlock: without it the server is never started (sandbox.py)"
    cache, log = tmp_path / "cache", tmp_path / "tool-log"
    log.mkdir()
    victim_repo = tmp_path / "victim-checkout"
    shutil.copytree(repo, victim_repo)
    helm = platform_helm(tmp_path, cache, log)
    sidecar = {
        "DRIFTGUARD_CMP_CACHE_DIR": str(cache),
        "DRIFTGUARD_HELM": str(helm),
        "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": str(log),  # the log and the handshake between the two
        "DRIFTGUARD_CMP_PRELOAD": "on",
    }

    def start(checkout: Path, name: str, secret: str) -> subprocess.Popen[str]:
        env = {**cmp_env(APP), **sidecar, "ARGOCD_APP_NAME": name, "ARGOCD_ENV_DB_PASSWORD": secret}
        return subprocess.Popen(
            [*caller, "generate"],
            cwd=checkout / APP,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            process_group=0,  # argocd-cmp-server: Setpgid, same session
        )

    def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
        out, err = proc.communicate(timeout=120)
        return proc.returncode, out, err

    clean = finish(start(repo, "argocd_attacker", "unused"))  # the same renders, no attack
    assert clean[0] == 0, clean[2]
    clean_victim = finish(start(victim_repo, "argocd_victim", "unused"))
    assert clean_victim[0] == 0, clean_victim[2]
    server = wait_until(lambda: server_pid(cache), "the preload server answers")
    key = (cache / preload.KEY_NAME).read_bytes()
    inode = (cache / preload.SOCKET_NAME).stat().st_ino

    (victim_repo / APP / "wait-for-attack").touch()
    # the dump holds what the tool could read of every process on the machine, other checkouts'
    # runs of this test included: what it must not hold is this run's own, so each is unique
    victim_secret, attacker_secret = (
        f"victim-s3cret-{uuid.uuid4().hex}",
        f"attacker-s3cret-{uuid.uuid4().hex}",
    )
    victim = start(victim_repo, "argocd_victim", victim_secret)
    wait_until(lambda: (log / "victim-waiting").exists(), "the other tenant's render is in its helm")
    shutil.copy(HERE / "hostile_tool.py", repo / APP / "attack.py")
    attacked = start(repo, "argocd_attacker", attacker_secret)
    attacked_result, victim_result = finish(attacked), finish(victim)

    outcome = json.loads((log / "takeover.json").read_text())
    assert outcome.pop("found-server") is True
    assert set(outcome) == STEPS
    assert {k: v for k, v in outcome.items() if not v.startswith("refused")} == {}, outcome
    dump = (log / "dump.bin").read_bytes()
    for secret in (key, key.hex().encode(), victim_secret.encode(), attacker_secret.encode()):
        assert secret not in dump, "a process the tool could read holds a secret"
    # every plugin process of this run has this entry (the sidecar's settings); a command line
    # elsewhere on the machine may name the variable, never this run's cache
    assert f"DRIFTGUARD_CMP_CACHE_DIR={cache}".encode() not in dump, (
        "the tool read a plugin process's environment"
    )

    # both renders are what they are without the attack, and both were preloaded by the same server
    assert attacked_result[:2] == clean[:2], attacked_result[2]
    assert victim_result[:2] == clean_victim[:2], victim_result[2]
    parents = {s["ppid"] for s in starts_of(log)}
    assert attacked.pid not in parents and victim.pid not in parents, "rendered in-process, not preloaded"
    assert alive(server) and server_pid(cache) == server
    assert (cache / preload.SOCKET_NAME).stat().st_ino == inode
    assert (cache / preload.KEY_NAME).read_bytes() == key
    assert not list(cache.glob("planted*")) and not list(cache.glob("victim.*")), "planted in the cache"
    # before: the forged request was served as Application "victim", whose launch plan it wrote
    assert not Path(launch.plan_file(str(cache), "victim")).exists()
    after = finish(start(repo, "argocd_attacker", "unused"))
    assert after[:2] == clean[:2] and server_pid(cache) == server


def starts_of(log: Path) -> list[dict[str, int]]:
    return starts(log / "starts.jsonl")


def test_a_cache_a_tool_may_write_gets_no_server_and_no_key(
    repo: Path, tmp_path: Path, caller: list[str]
) -> None:
    """The platform opened the cache to tools (DRIFTGUARD_CMP_TOOL_WRITE_PATHS above it): no preloading.

    A tool could plant a socket and a key there, and so pass any proof; the render runs in-process.
    """
    cache = tmp_path / "cache"
    env = {
        **cmp_env(APP),
        "DRIFTGUARD_CMP_CACHE_DIR": str(cache),
        "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": str(tmp_path),
        "DRIFTGUARD_CMP_PRELOAD": "on",
    }
    assert sandbox.reaches(str(cache)) is False  # the test's own process: not the render's settings
    for _ in range(2):
        run = subprocess.run(
            [*caller, "generate"],
            cwd=repo / APP,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            process_group=0,
        )
        assert run.returncode == 0, run.stderr
    assert not (cache / preload.SOCKET_NAME).exists() and not (cache / preload.KEY_NAME).exists()
    assert not (cache / preload.STARTING).exists()
    assert not list(cache.glob("*.plan")), "a launch plan where a tool may write it"

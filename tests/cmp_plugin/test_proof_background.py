"""A proof ``generate`` left pending goes on in the background (cmp_plugin/proof_background.py).

Counted, never timed: helm is a wrapper that logs each run, ``bg`` when it runs niced below the
test (the background proof), ``fg`` otherwise; a background helm waits for a gate file the test
creates, so the test knows the background is still at work when the first generate has answered.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmp_plugin import memory, proof_background
from tests.helpers import FRONT, wait_until

from .conftest import Generate, cmp_env
from .test_preload import alive, server_pid

HELM = os.environ["DRIFTGUARD_HELM"]
KEYS = 6


def _chart(repo: Path) -> str:
    """Six keys gating six ConfigMaps of one template: the proof needs a render per key, at least."""
    chart = repo / "charts" / "six"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: six\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("".join(f"k{i}: true\n" for i in range(KEYS)))
    (chart / "templates" / "all.yaml").write_text(
        "".join(
            f"---\n{{{{- if .Values.k{i} }}}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n{{{{- end }}}}\n"
            for i in range(KEYS)
        )
    )
    return "charts/six"


def _world(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """The tool settings, the helm log and the gate file that lets the background's helm run."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log, gate = logs / "helm.log", logs / "gate"
    base = os.nice(0)
    assert base < 19, "the test runs at the lowest priority: a niced background cannot be told apart"
    helm = logs / "helm"
    helm.write_text(
        "#!/bin/sh\n"
        f'if [ "$(nice)" -gt {base} ]; then\n'
        f'  echo bg >> "{log}"\n'
        f'  while [ ! -e "{gate}" ]; do sleep 0.05; done\n'  # the tool polls the test's gate
        "else\n"
        f'  echo fg >> "{log}"\n'
        "fi\n"
        f'exec "{HELM}" "$@"\n'
    )
    helm.chmod(0o755)
    env = {
        "DRIFTGUARD_HELM": str(helm),
        "DRIFTGUARD_CMP_TOOL_READ_PATHS": f"{Path(HELM).parent}:{logs}",
        "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": str(logs),
    }
    return env, log, gate


def _runs(log: Path, who: str) -> int:
    return log.read_text().splitlines().count(who) if log.exists() else 0


def _wait_for(check: Callable[[], Any], what: str, seconds: float = 120.0) -> Any:
    return wait_until(check, what, timeout=seconds)


def _locks(cache: Path) -> list[Path]:
    return sorted((cache / proof_background.LOCKS).glob("*.lock"))


def test_the_pending_proof_ends_in_the_background_and_the_next_generate_renders_once(
    generate: Generate, repo: Path, tmp_path: Path
) -> None:
    app = _chart(repo)
    env, log, gate = _world(tmp_path)
    cache = repo.parent / "baseline-cache"
    first = generate(app, **env)  # returns once stdout and stderr are closed: the background holds neither
    assert first.returncode == 0, first.stderr
    assert "being proven" in first.stderr
    # the background's helm waits for the gate: it is at work, and nothing is proven yet
    assert len(_locks(cache)) == 1 and not list(cache.glob("verdicts-*.json"))
    gate.touch()
    _wait_for(lambda: list(cache.glob("verdicts-*.json")) and not _locks(cache), "the background proof ends")
    assert _runs(log, "bg") >= 1
    before = _runs(log, "fg") + _runs(log, "bg")
    second = generate(app, **env)
    assert second.returncode == 0, second.stderr
    assert _runs(log, "fg") + _runs(log, "bg") == before + 1  # the main render, no proof render
    assert second.stdout == first.stdout
    note = [line for line in second.stderr.splitlines() if "chart default" in line]
    assert len(note) == 1 and f"{KEYS} resource switches rely on chart defaults:" in note[0], second.stderr
    assert "being proven" not in second.stderr


def test_the_background_proof_waits_for_a_render_slot(generate: Generate, repo: Path, tmp_path: Path) -> None:
    app = _chart(repo)
    env, log, gate = _world(tmp_path)
    # one render slot: the container's limit holds one render's cap and the headroom
    env["DRIFTGUARD_CMP_MEMORY_LIMIT"] = str(memory.HEADROOM + memory.DEFAULT_CAP)
    cache = repo.parent / "baseline-cache"
    first = generate(app, **env)
    assert first.returncode == 0, first.stderr
    assert len(_locks(cache)) == 1
    held = threading.Event()
    slot = os.open(cache / "render-slots" / "slot-0", os.O_RDWR)
    try:

        def take() -> None:
            fcntl.flock(slot, fcntl.LOCK_EX)  # as a foreground render waiting for the slot
            held.set()

        taker = threading.Thread(target=take, daemon=True)
        taker.start()
        gate.touch()  # the background's render ends and gives the slot back between renders
        _wait_for(held.is_set, "the slot is ours")
        at = _runs(log, "bg")

        def waiting() -> int:
            state = _locks(cache)[0].read_text().split() if _locks(cache) else []
            return int(state[1]) if state[:1] == ["waiting"] else 0

        seen = _wait_for(waiting, "the background waits for the slot")
        _wait_for(lambda: waiting() > seen, "the background tries again")
        assert _runs(log, "bg") == at, "a background render ran without a slot"
        assert not list(cache.glob("verdicts-*.json"))
    finally:
        os.close(slot)  # the slot is free: the background goes on
    _wait_for(lambda: list(cache.glob("verdicts-*.json")) and not _locks(cache), "the background proof ends")
    assert _runs(log, "bg") > at


def test_a_preloaded_generate_proves_in_the_background_outside_the_callers_group(
    repo: Path, tmp_path: Path, no_preload_servers_left: None
) -> None:
    """Preloaded (the shipped sidecar): the render child reports its code and proves on, out of the
    command's process group: argocd-cmp-server's kill of that group after the command spares it."""
    app = _chart(repo)
    tools, log, gate = _world(tmp_path)
    cache = tmp_path / "cache"

    def run(params: list[dict[str, Any]] | None = None) -> subprocess.Popen[str]:
        env = {
            **cmp_env(app, params),
            **tools,
            "DRIFTGUARD_CMP_CACHE_DIR": str(cache),
            "DRIFTGUARD_CMP_PRELOAD": "on",
        }
        return subprocess.Popen(
            [str(FRONT), "generate"],
            cwd=repo / app,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            process_group=0,  # argocd-cmp-server: Setpgid
        )

    off = run([{"name": "implicit-defaults", "string": "off"}])  # starts the preload server
    assert off.wait(timeout=120) == 0
    _wait_for(lambda: server_pid(cache), "the preload server answers")
    first = run()
    out, err = first.communicate(timeout=120)  # EOF on both: the background holds neither
    assert first.returncode == 0, err
    assert "being proven" in err and len(_locks(cache)) == 1
    with contextlib.suppress(ProcessLookupError):
        os.killpg(first.pid, signal.SIGKILL)  # what argocd-cmp-server does once the command ends
    gate.touch()
    _wait_for(lambda: list(cache.glob("verdicts-*.json")) and not _locks(cache), "the background proof ends")
    before = _runs(log, "fg") + _runs(log, "bg")
    second = run()
    out2, err2 = second.communicate(timeout=120)
    assert second.returncode == 0, err2
    assert _runs(log, "fg") + _runs(log, "bg") == before + 1 and out2 == out
    assert f"{KEYS} resource switches rely on chart defaults:" in err2 and "being proven" not in err2


def test_a_killed_background_proof_leaves_the_cache_for_the_next_generate(
    generate: Generate, repo: Path, tmp_path: Path
) -> None:
    app = _chart(repo)
    env, log, gate = _world(tmp_path)
    scratch = tmp_path / "scratch"  # the renders' scratch root: the killed proof's copy is seen here
    scratch.mkdir()
    env["TMPDIR"] = str(scratch)
    cache = repo.parent / "baseline-cache"
    assert generate(app, **env).returncode == 0

    def proving() -> int:
        state = _locks(cache)[0].read_text().split() if _locks(cache) else []
        return int(state[1]) if state[:1] == ["proving"] else 0

    pid = _wait_for(proving, "the background proves")
    os.killpg(pid, signal.SIGKILL)  # its session: the process and the helm it waits for
    # its lock is released once it has exited, not when the signal is sent: a generate before
    # that finds the digest still locked, starts no background, and the dead one's lock file
    # (never removed by a kill) stays for good
    _wait_for(lambda: not alive(pid), "the killed background to exit")
    assert len(list(scratch.glob("driftguard-proof-*"))) == 1  # its copy: left by the kill
    gate.touch()
    again = generate(app, **env)  # goes on from what was settled, and leaves the rest to a new background
    assert again.returncode == 0, again.stderr
    _wait_for(lambda: list(cache.glob("verdicts-*.json")) and not _locks(cache), "the background proof ends")
    before = _runs(log, "fg") + _runs(log, "bg")
    last = generate(app, **env)
    assert last.returncode == 0 and _runs(log, "fg") + _runs(log, "bg") == before + 1
    assert f"{KEYS} resource switches rely on chart defaults:" in last.stderr
    assert not list(scratch.glob("driftguard-proof-*"))  # removed by the next background proof

"""Issue 27: memory cannot take the sidecar down (cmp_plugin/memory.py).

Two heavy renders at once in a container with a 1 GiB memory limit: before, each was capped at
768 MiB of RLIMIT_DATA alone, Go grew past it resident, and the kernel OOM-killed both. Now the
renders that may run at once are bounded so that renders x cap fits under the limit read from
the cgroup, the tools run with GOMEMLIMIT, and the cap holds against measured resident memory.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cmp_plugin import memory
from cmp_plugin.process import tool_env
from tests.helpers import start_cmp, wait_until

from .conftest import cmp_env

MiB = 1 << 20
BOMB = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n"
    "{{- range $i := until 100000000 }}\n  k{{ $i }}: v\n{{- end }}\n"
)


def heavy_chart(root: Path) -> Path:
    here = root / "apps" / "heavy"
    (here / "templates").mkdir(parents=True)
    (root / ".git").mkdir(exist_ok=True)
    (here / "Chart.yaml").write_text("apiVersion: v2\nname: heavy\nversion: 1.0.0\n")
    (here / "values.yaml").write_text("")
    (here / "templates" / "cm.yaml").write_text(BOMB)
    return here


def start(here: Path, cache: Path, *, cgroup: Path | None = None, **extra: str) -> subprocess.Popen[str]:
    env = cmp_env("apps/heavy", **extra)
    env["DRIFTGUARD_CMP_CACHE_DIR"] = str(cache)
    procs = str(cgroup / "cgroup.procs") if cgroup else ""

    def enter() -> None:  # the render's whole process tree lives in the container's cgroup
        if procs:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

    return start_cmp(
        here,
        env,
        "generate",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=enter if procs else None,  # only writes our pid to a file
        start_new_session=True,
    )


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Path]:
    """A real memory cgroup of 1 GiB, as the sidecar's container (needs a writable cgroup tree)."""
    for base in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory")):
        if not (base / "cgroup.procs").exists():
            continue  # not a cgroup directory (v1 mounts a tmpfs at /sys/fs/cgroup)
        group = base / f"driftguard-test-{uuid.uuid4().hex[:8]}"
        try:
            group.mkdir()
        except OSError:
            continue
        try:
            limit = group / ("memory.max" if (group / "memory.max").exists() else "memory.limit_in_bytes")
            limit.write_text(str(1024 * MiB))
            yield group
        finally:

            def removed(group: Path = group) -> bool:
                try:
                    group.rmdir()
                except OSError:  # the last process is still leaving the group
                    return False
                return True

            with contextlib.suppress(AssertionError):
                wait_until(removed, "the cgroup to empty", timeout=5)
        return
    pytest.skip(
        "no writable cgroup tree here: test_two_heavy_renders_under_a_declared_limit covers the slots"
    )


def oom_kills(group: Path) -> int:
    for name in ("memory.events", "memory.oom_control"):
        try:
            for line in (group / name).read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        except OSError:
            continue
    return 0


@pytest.mark.slow  # the fast lane's sibling: test_two_heavy_renders_under_a_declared_limit
def test_two_heavy_renders_in_a_1gib_container_are_refused_not_killed(
    tmp_path: Path, container: Path
) -> None:
    here = heavy_chart(tmp_path / "checkout")
    runs = [start(here, tmp_path / "cache", cgroup=container) for _ in range(2)]
    outs = [r.communicate(timeout=120) for r in runs]
    for run, (_, err) in zip(runs, outs, strict=True):
        assert run.returncode > 0, (run.returncode, err)  # an exit of ours, not a signal
        assert "ran out of memory" in err or "already use the container's memory" in err, err
    assert oom_kills(container) == 0


def test_two_heavy_renders_under_a_declared_limit(tmp_path: Path) -> None:
    """The Downward API's limits.memory (DRIFTGUARD_CMP_MEMORY_LIMIT) bounds renders the same way."""
    here = heavy_chart(tmp_path / "checkout")
    limit = {"DRIFTGUARD_CMP_MEMORY_LIMIT": str(512 * MiB)}  # room for one render of 384 MiB
    runs = [start(here, tmp_path / "cache", **limit) for _ in range(2)]
    outs = [r.communicate(timeout=120) for r in runs]
    for run, (_, err) in zip(runs, outs, strict=True):
        assert run.returncode > 0, (run.returncode, err)
        assert "ran out of memory" in err or "already use the container's memory" in err, err
        assert "DRIFTGUARD_CMP_MAX_MEMORY" in err, err


def test_tools_get_gomemlimit_under_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRIFTGUARD_CMP_MEMORY_LIMIT", str(1024 * MiB))
    monkeypatch.setenv("DRIFTGUARD_CMP_MAX_MEMORY", str(768 * MiB))
    assert int(tool_env(tmp_path)["GOMEMLIMIT"]) == 768 * MiB * 3 // 4


def test_the_cgroup_limit_is_read_from_this_process_cgroup(tmp_path: Path, container: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from cmp_plugin import memory; print(memory.container_limit({}))"],
        preexec_fn=lambda: (container / "cgroup.procs").write_text(str(os.getpid())),
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(proc.stdout) == 1024 * MiB


@given(st.one_of(st.none(), st.integers(1, 1 << 40)), st.integers(1, 1 << 34))
def test_renders_times_cap_fit_under_the_limit(limit: int | None, cap: int) -> None:
    slots, fitted = memory.budget(limit, cap)
    assert fitted <= max(cap, memory.MIN_CAP)
    if limit is None:
        assert slots == 0 and fitted == cap
    elif limit >= memory.HEADROOM + memory.MIN_CAP:
        assert slots >= 1 and slots * fitted + memory.HEADROOM <= limit

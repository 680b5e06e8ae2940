"""What the preload server loads before it forks (cmp_plugin/preload/server.py ``_warm``).

A render served from the render cache costs ~3 ms of the plugin's own work; a module the forked
child still has to import, or a regular expression it still has to compile, costs as much again
(issue 33's monorepo commit is 152 such hits). Counted, not timed: the modules and patterns a hit
adds after ``_warm``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cmp_plugin.conftest import Generate, cmp_env
from tests.cmp_plugin.test_render_cache import HELM, _helm_runs, _helm_wrapper

PROBE = """
import re, sys
sys.argv = ["driftguard-cmp", "generate"]
from cmp_plugin.preload.server import _warm
from cmp_plugin.cli import main
_warm()
modules, patterns = set(sys.modules), set(re._cache)
code = main(early=None)
sys.stdout.flush()
print("\\n@@", code, sorted(set(sys.modules) - modules), [k[1] for k in set(re._cache) - patterns], sep="\\n@@")
"""


def test_a_hit_after_the_warm_up_imports_and_compiles_nothing(
    generate: Generate, repo: Path, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    helm = _helm_wrapper(logs / "helm", logs / "helm.log")
    env = {
        "DRIFTGUARD_HELM": str(helm),
        "DRIFTGUARD_CMP_TOOL_READ_PATHS": f"{Path(HELM).parent}:{logs}",
        "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": str(logs),
        "DRIFTGUARD_CMP_RENDER_CACHE_BYTES": str(64 << 20),  # on, whatever the lane's default
    }
    params = [{"name": "implicit-defaults", "string": "off"}]  # no background proof runs helm later
    miss = generate("charts/platform", params, **env)
    assert miss.returncode == 0, miss.stderr
    runs = _helm_runs(logs / "helm.log")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=repo / "charts/platform",
        env={
            "DRIFTGUARD_CMP_CACHE_DIR": str(repo.parent / "baseline-cache"),
            **cmp_env("charts/platform", params, **env),
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert "\n@@" in proc.stdout, proc.stderr
    out, code, modules, patterns = proc.stdout.rsplit("\n@@", 3)
    assert code.strip() == "0", proc.stderr
    assert _helm_runs(logs / "helm.log") == runs, "not a hit: helm ran again"
    assert out.lstrip().startswith(miss.stdout.strip()[:200])  # the same render, from the cache
    assert eval(modules) == [], "imported by the forked child on every hit: add it to _warm"
    assert eval(patterns) == [], "compiled by the forked child on every hit: compile it at import"


def test_the_rehearsal_runs_the_hit_path_on_the_servers_own_chart_and_writes_nothing(tmp_path: Path) -> None:
    """A child forked ahead rehearses before it takes a connection (cmp_plugin/preload/server.py
    ``_rehearse``): on the server's own chart in its private cache, to the end (a rehearsal that
    fails quietly buys nothing), leaving the cache as it found it."""
    from cmp_plugin.preload import server

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    root = server._stage_rehearsal(str(cache))
    assert root is not None and Path(root).parent == cache
    staged = {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()}
    assert staged and all(p.stat().st_mode & 0o077 == 0 for p in staged)
    assert server._rehearse(root)
    assert {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()} == staged

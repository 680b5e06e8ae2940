"""The CMP's settings, and what `generate` keeps off its start-up path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cmp_plugin.settings import CmpSettings
from driftguard.errors import ConfigError

from .conftest import cmp_env


def test_scratch_and_cache_follow_tmpdir() -> None:
    s = CmpSettings.from_env({"TMPDIR": "/var/tmp/cmp"})
    assert s.scratch_root == Path("/var/tmp/cmp")
    assert s.cache_dir == Path("/var/tmp/cmp/driftguard")
    s = CmpSettings.from_env({"TMPDIR": "/var/tmp/cmp", "DRIFTGUARD_CMP_CACHE_DIR": "/cache"})
    assert s.cache_dir == Path("/cache") and s.scratch_root == Path("/var/tmp/cmp")
    assert CmpSettings.from_env({}).scratch_root == Path("/tmp")


def test_the_argocd_token_never_shows_in_repr() -> None:
    s = CmpSettings.from_env(
        {"DRIFTGUARD_ARGOCD_URL": "https://argocd.example.com", "DRIFTGUARD_ARGOCD_TOKEN": "s3cr3t-token"}
    )
    assert "s3cr3t-token" not in repr(s) and "argocd_token='***'" in repr(s)
    assert s.argocd_token == "s3cr3t-token"


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"DRIFTGUARD_CMP_TIMEOUT": "soon"}, "DRIFTGUARD_CMP_TIMEOUT"),
        ({"DRIFTGUARD_CMP_TIMEOUT": "-1"}, "DRIFTGUARD_CMP_TIMEOUT"),
        ({"DRIFTGUARD_CMP_BASELINE_REQUIRED": "maybe"}, "DRIFTGUARD_CMP_BASELINE_REQUIRED"),
        (
            {"DRIFTGUARD_ARGOCD_URL": "argocd.example.com", "DRIFTGUARD_ARGOCD_TOKEN": "t"},
            "DRIFTGUARD_ARGOCD_URL",
        ),
        ({"DRIFTGUARD_ARGOCD_URL": "https://argocd.example.com"}, "DRIFTGUARD_ARGOCD_TOKEN"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        CmpSettings.from_env(env)
    assert info.value.setting == setting


def test_missing_helm_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="DRIFTGUARD_HELM"):
        CmpSettings.from_env({"DRIFTGUARD_HELM": str(tmp_path / "no-helm")}).helm_path()


PROBE = """
import sys
import cmp_plugin.cli
before = set(sys.modules)
code = cmp_plugin.cli.main(["generate"])
sys.stdout.flush()
print("\\n@@", code, sorted(before), sorted(set(sys.modules)), sep="\\n@@")
"""


def test_generate_keeps_heavy_imports_off_its_path(repo: Path) -> None:
    """What generate imports before helm starts, and in the whole run (bench/cmp_overhead.py has the ms)."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=repo / "charts/web",
        # a cache of its own: the default ($TMPDIR/driftguard) is shared with every run on the
        # machine, and another's launch plan, cached render or baseline for this app would change
        # what this run imports (or make the shrink guard compare with another checkout's chart)
        env={**cmp_env("charts/web"), "DRIFTGUARD_CMP_CACHE_DIR": str(repo.parent / "probe-cache")},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    _, code, before, after = proc.stdout.rsplit("\n@@", 3)
    assert code.strip() == "0", proc.stderr
    before_start = set(eval(before))
    whole_run = set(eval(after))
    # before the renderer starts: no YAML, no guards, no dataclasses (each is ms on every render)
    assert not before_start & {
        "yaml",
        "dataclasses",
        "inspect",
        "subprocess",
        "cmp_plugin.guards",
        "cmp_plugin.scan",
    }
    # in the whole render: no dataclasses/inspect, no thread pools, no HTTP or kube clients
    assert not whole_run & {
        "dataclasses",
        "inspect",
        "concurrent.futures",
        "logging",
        "requests",
        "kubernetes",
    }
    assert {"yaml", "cmp_plugin.guards", "cmp_plugin.scan"} <= whole_run  # the probe saw a real render

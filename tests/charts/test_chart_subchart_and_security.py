"""charts/driftguard as a subchart of an umbrella chart, and a schema that refuses root, privilege and
a writable root filesystem unless an explicit override says so (real helm template and lint)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from .test_chart import CHART, helm, render

# (value set, the path helm 4 names when it refuses it (a JSON pointer), the override that allows it)
UNSAFE = [
    ("podSecurityContext.runAsUser=0", "/podSecurityContext/runAsUser", "allowRunAsRoot"),
    ("containerSecurityContext.runAsUser=0", "/containerSecurityContext/runAsUser", "allowRunAsRoot"),
    ("podSecurityContext.runAsNonRoot=false", "/podSecurityContext/runAsNonRoot", "allowRunAsRoot"),
    ("containerSecurityContext.privileged=true", "/containerSecurityContext/privileged", "allowPrivileged"),
    (
        "containerSecurityContext.allowPrivilegeEscalation=true",
        "/containerSecurityContext/allowPrivilegeEscalation",
        "allowPrivileged",
    ),
    (
        "containerSecurityContext.capabilities.add={SYS_ADMIN}",
        "/containerSecurityContext/capabilities/add",
        "allowPrivileged",
    ),
    (
        "containerSecurityContext.readOnlyRootFilesystem=false",
        "/containerSecurityContext/readOnlyRootFilesystem",
        "allowWritableRootFilesystem",
    ),
    # removing the key (helm: null deletes a default) leaves a writable root filesystem too
    (
        "containerSecurityContext.readOnlyRootFilesystem=null",
        "missing property 'readOnlyRootFilesystem'",
        "allowWritableRootFilesystem",
    ),
    ("podSecurityContext.runAsNonRoot=null", "missing property 'runAsNonRoot'", "allowRunAsRoot"),
]


@pytest.mark.parametrize(("flag", "named", "override"), UNSAFE, ids=[u[0] for u in UNSAFE])
def test_the_schema_refuses_unsafe_values_unless_overridden(flag: str, named: str, override: str) -> None:
    out = helm("--set", flag)
    assert out.returncode != 0 and named in out.stderr, out.stderr
    # another override does not open it
    others = {"allowRunAsRoot", "allowPrivileged", "allowWritableRootFilesystem"} - {override}
    for other in others:
        assert helm("--set", flag, "--set", f"securityOverrides.{other}=true").returncode != 0
    # the explicit one does
    allowed = helm("--set", flag, "--set", f"securityOverrides.{override}=true")
    assert allowed.returncode == 0, allowed.stderr


def test_the_defaults_are_safe_as_rendered() -> None:
    for obj in render():
        if obj["kind"] != "Deployment":
            continue
        pod = obj["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
            assert not sc.get("privileged")


def umbrella(tmp_path: Path, values: dict[str, object]) -> Path:
    root = tmp_path / "platform"
    (root / "charts").mkdir(parents=True)
    shutil.copytree(CHART, root / "charts" / "driftguard")
    (root / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": "platform",
                "version": "1.0.0",
                "dependencies": [{"name": "driftguard", "version": "0.1.0"}],
            }
        )
    )
    (root / "values.yaml").write_text(yaml.safe_dump(values))
    return root


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"global": {"imageRegistry": "registry.example.com", "labels": {"team": "platform"}}},
        {"global": {"imageRegistry": "registry.example.com"}, "driftguard": {"analysis": {"replicas": 3}}},
    ],
    ids=["no-globals", "globals", "globals-and-values"],
)
def test_the_chart_works_as_a_subchart(tmp_path: Path, values: dict[str, object]) -> None:
    chart = umbrella(tmp_path, values)
    helm_bin = os.environ["DRIFTGUARD_HELM"]
    lint = subprocess.run([helm_bin, "lint", str(chart)], capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    out = subprocess.run(
        [helm_bin, "template", "platform", str(chart), "-n", "argocd"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    deployments = {
        d["metadata"]["name"]: d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] == "Deployment"
    }
    assert set(deployments) == {"driftguard-notifier", "driftguard-analysis"}
    ours: Any = values.get("driftguard", {})
    want = ours.get("analysis", {}).get("replicas", 2)
    assert deployments["driftguard-analysis"]["spec"]["replicas"] == want


def test_a_typo_is_still_refused_in_a_subchart(tmp_path: Path) -> None:
    chart = umbrella(tmp_path, {"driftguard": {"notifer": {"enabled": False}}})
    out = subprocess.run(
        [os.environ["DRIFTGUARD_HELM"], "template", "platform", str(chart)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0 and "notifer" in out.stderr

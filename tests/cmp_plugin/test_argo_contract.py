"""What Argo CD hands the plugin in the simplest cases, and how it picks a tool.

- An Application with ``plugin: {name: driftguard}`` and no parameters: Argo CD marshals the nil
  parameter list as JSON ``null`` (pkg/apis/application/v1alpha1/types.go,
  ``ApplicationSourcePluginParameters.Environ``, v3.5.1); unset, empty and ``[]`` mean the same.
- A directory with both ``Chart.yaml`` and ``kustomization.yaml``: Argo CD's discovery
  (util/app/discovery/discovery.go, ``Discover``) assigns Helm, then Kustomize, the last winning.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import Generate
from .test_parity import KUBECTL, bare

NO_PARAMETERS = [None, "", "  ", "null", "[]"]


def _app_parameters(value: str | None) -> dict[str, str]:
    return {} if value is None else {"ARGOCD_APP_PARAMETERS": value}


@pytest.mark.parametrize("value", NO_PARAMETERS)
def test_no_parameters_renders_like_the_defaults(generate: Generate, value: str | None) -> None:
    reference = generate("overlays/base")
    proc = generate("overlays/base", **_app_parameters(value))
    assert reference.returncode == 0 and proc.returncode == 0, proc.stderr
    assert proc.stdout == reference.stdout and "kind: Deployment" in proc.stdout


@pytest.mark.parametrize("value", NO_PARAMETERS)
def test_no_parameters_announces_the_defaults(generate: Generate, value: str | None) -> None:
    reference = generate("charts/web", command="parameters")
    proc = generate("charts/web", command="parameters", **_app_parameters(value))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == reference.stdout and '"name": "values-files"' in proc.stdout


@pytest.mark.parametrize("value", NO_PARAMETERS)
def test_no_parameters_discovers(generate: Generate, value: str | None) -> None:
    proc = generate("charts/web", command="discover", **_app_parameters(value))
    assert (proc.returncode, proc.stdout.strip()) == (0, "helm"), proc.stderr


def test_a_json_object_is_still_refused(generate: Generate) -> None:
    proc = generate("overlays/base", ARGOCD_APP_PARAMETERS='{"name": "values"}')
    assert proc.returncode == 2 and "must be a JSON array" in proc.stderr


@pytest.mark.parametrize("marker", ["kustomization.yaml", "kustomization.yml", "Kustomization"])
def test_kustomize_wins_over_helm_like_argo_cd(generate: Generate, repo: Path, marker: str) -> None:
    both = repo / "overlays/both"
    shutil.copytree(repo / "overlays/base", both)
    (both / "kustomization.yaml").rename(both / marker)
    (both / "Chart.yaml").write_text("apiVersion: v2\nname: both\nversion: 0.1.0\n")
    (both / "templates").mkdir()
    (both / "templates/cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-helm}\n")
    assert generate("overlays/both", command="discover").stdout.strip() == "kustomize"
    proc = generate("overlays/both")
    assert proc.returncode == 0, proc.stderr
    expected = bare([KUBECTL, "kustomize", ".", "--load-restrictor", "LoadRestrictionsRootOnly"], both)
    assert proc.stdout == expected and "from-helm" not in proc.stdout

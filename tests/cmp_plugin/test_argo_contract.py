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


# --- opt-in by name: no discovery rule -------------------------------------------------------------


def _argo_asks_plugin(config: dict[str, object], *, named: bool, discovery_matches: bool) -> bool:
    """Whether Argo CD renders an Application with this plugin (reference model, argo-cd v3.5.1).

    util/app/discovery/discovery.go ``cmpSupports``: a plugin whose discovery is not configured
    supports the repository only when the Application names it; otherwise its discovery decides.
    cmpserver/plugin/plugin.go ``isDiscoveryConfigured``: ``discover.fileName``,
    ``discover.find.glob`` or ``discover.find.command`` set.
    """
    spec = config["spec"]
    assert isinstance(spec, dict)
    discover = spec.get("discover") or {}
    find = discover.get("find") or {}
    configured = bool(discover.get("fileName")) or bool(find.get("glob")) or bool(find.get("command"))
    if not configured:
        return named
    return discovery_matches


@pytest.mark.parametrize("named", [True, False])
@pytest.mark.parametrize("looks_like_ours", [True, False])
def test_only_applications_that_name_the_plugin_render_with_it(named: bool, looks_like_ours: bool) -> None:
    """Installing the sidecar changes nothing for an Application that does not name `driftguard`."""
    import yaml

    from cmp_plugin.plugin_yaml import PLUGIN_NAME, plugin_config

    from .conftest import ROOT

    assert PLUGIN_NAME == "driftguard"
    shipped = yaml.safe_load(
        yaml.safe_load((ROOT / "manifests/base/cmp/plugin.yaml").read_text())["data"]["plugin.yaml"]
    )
    chart = yaml.safe_load((ROOT / "charts/driftguard/files/plugin.yaml").read_text())
    helm_values = yaml.safe_load((ROOT / "examples/argo-helm/values.yaml").read_text())
    argo_helm = {"spec": helm_values["configs"]["cmp"]["plugins"]["driftguard"]}
    for config in (plugin_config(), shipped, chart, argo_helm):
        # a chart, an overlay or plain YAML (looks_like_ours) or anything else: the name alone decides
        assert _argo_asks_plugin(config, named=named, discovery_matches=looks_like_ours) is named

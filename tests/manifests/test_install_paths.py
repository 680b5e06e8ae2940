"""The README's kustomize install, built offline with the real kubectl kustomize: the example
(Argo CD v3.5.1's own install.yaml plus driftguard's components) and the component on a team's own
Argo CD kustomization, where everything of theirs survives."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "manifests" / "examples" / "argocd"
COMPONENT = ROOT / "manifests" / "components" / "argocd"
SUBSCRIPTIONS = ROOT / "manifests" / "components" / "argocd-default-subscriptions"
CATALOG = ROOT / "tests" / "reference" / "argo-cd" / "notifications-catalog.yaml"
FLAG = "--metrics-application-conditions=ComparisonError"
# every fetch kustomize could make (its HTTP client, git) goes to a closed port: a build that needs
# the network fails here
OFFLINE = {
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "GIT_TERMINAL_PROMPT": "0",
}
OFFLINE |= {k.lower(): v for k, v in OFFLINE.items() if k.endswith("PROXY")}
Objects = dict[tuple[str, str], dict[str, Any]]


def build(directory: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy",)} | OFFLINE
    cmd = [os.environ["DRIFTGUARD_KUSTOMIZE"], "kustomize", str(directory)]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)


def objects(directory: Path) -> Objects:
    out = build(directory)
    assert out.returncode == 0, out.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}


@functools.cache
def example() -> Objects:
    return objects(EXAMPLE)


def pod(objs: Objects, kind: str, name: str) -> dict[str, Any]:
    return dict(objs[(kind, name)]["spec"]["template"]["spec"])


def test_a_build_that_needs_the_network_fails_here(tmp_path: Path) -> None:
    # the old example's remote base, under the same environment: proves the builds below are offline
    (tmp_path / "kustomization.yaml").write_text(
        "resources:\n  - https://raw.githubusercontent.com/argoproj/argo-cd/v3.5.1/manifests/install.yaml\n"
    )
    out = build(tmp_path)
    assert out.returncode != 0 and "127.0.0.1:9" in out.stderr


@pytest.mark.slow  # whole kustomize builds of the install
def test_the_example_builds_offline_into_argo_cd_with_driftguard() -> None:
    objs = example()
    for obj in objs.values():
        assert obj["metadata"].get("namespace", "argocd") == "argocd" or obj["kind"].startswith("Cluster")
        if not obj["apiVersion"].startswith("argoproj.io/"):
            kubernetes_validate.validate(obj, "1.32", strict=True)
    # Argo CD's own objects and driftguard's
    assert {("Deployment", "argocd-server"), ("Deployment", "driftguard-notifier")} <= set(objs)
    assert ("Deployment", "driftguard-analysis") in objs and ("ConfigMap", "driftguard-cmp-plugin") in objs
    repo = pod(objs, "Deployment", "argocd-repo-server")
    assert {c["name"] for c in repo["containers"]} == {"argocd-repo-server", "driftguard-cmp"}
    assert repo["automountServiceAccountToken"] is False  # Argo CD's own setting, untouched
    args = pod(objs, "StatefulSet", "argocd-application-controller")["containers"][0]["args"]
    assert args == ["/usr/local/bin/argocd-application-controller", FLAG]
    cm = objs[("ConfigMap", "argocd-notifications-cm")]["data"]
    assert "service.webhook.driftguard" in cm
    [sub] = yaml.safe_load(cm["subscriptions"])
    assert sub["recipients"] == ["driftguard:alerts"]


def test_the_example_needs_nothing_outside_the_clone() -> None:
    kustomization = yaml.safe_load((EXAMPLE / "kustomization.yaml").read_text())
    for entry in kustomization.get("resources", []) + kustomization.get("components", []):
        assert "://" not in entry and (EXAMPLE / entry).resolve().is_relative_to(ROOT), entry
    assert (EXAMPLE / "argo-cd" / "LICENSE").read_text().lstrip().startswith("Apache License")


TEAM_PATCHES = """\
# the team's own: an argocd-vault-plugin sidecar, Slack with the catalog, a controller argument
- target: {kind: Deployment, name: argocd-repo-server}
  patch: |-
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: argocd-repo-server
    spec:
      template:
        spec:
          automountServiceAccountToken: true
          containers:
            - name: avp
              image: quay.io/argoproj/argocd:v3.5.1
              command: [/var/run/argocd/argocd-cmp-server]
              securityContext: {runAsNonRoot: true, runAsUser: 999}
              volumeMounts:
                - {mountPath: /var/run/argocd, name: var-files}
                - {mountPath: /home/argocd/cmp-server/plugins, name: plugins}
                - {mountPath: /tmp, name: avp-tmp}
          volumes:
            - name: avp-tmp
              emptyDir: {}
- target: {kind: StatefulSet, name: argocd-application-controller}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --self-heal-timeout-seconds=10
"""


def team_kustomization(tmp_path: Path, *, subscriptions: bool) -> Path:
    """A team's Argo CD kustomization (Argo CD's install.yaml, their patches, their notifications
    config from Argo CD's catalog) with driftguard's component added."""
    catalog = yaml.safe_load(CATALOG.read_text())
    catalog["data"]["service.slack"] = "token: $slack-token\n"
    if subscriptions:
        catalog["data"]["subscriptions"] = (
            "- recipients: [slack:deployments]\n  triggers: [on-sync-failed, on-health-degraded]\n"
        )
    (tmp_path / "notifications-cm.yaml").write_text(yaml.safe_dump(catalog))
    components = [os.path.relpath(COMPONENT, tmp_path)]
    if not subscriptions:
        components.append(os.path.relpath(SUBSCRIPTIONS, tmp_path))
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": "argocd",
        "resources": [os.path.relpath(EXAMPLE / "argo-cd", tmp_path)],
        "components": components,
        "patches": [{"path": "notifications-cm.yaml"}, *yaml.safe_load(TEAM_PATCHES)],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return tmp_path


@pytest.mark.slow  # whole kustomize builds of the install
def test_the_component_keeps_everything_of_the_teams(tmp_path: Path) -> None:
    objs = objects(team_kustomization(tmp_path, subscriptions=True))
    repo = pod(objs, "Deployment", "argocd-repo-server")
    containers = {c["name"]: c for c in repo["containers"]}
    assert set(containers) == {"argocd-repo-server", "avp", "driftguard-cmp"}
    assert containers["avp"]["image"] == "quay.io/argoproj/argocd:v3.5.1"
    assert {"avp-tmp", "driftguard-cmp-tmp", "var-files", "plugins"} <= {v["name"] for v in repo["volumes"]}
    assert repo["automountServiceAccountToken"] is True  # the team's, for AVP's Vault login
    args = pod(objs, "StatefulSet", "argocd-application-controller")["containers"][0]["args"]
    assert "--self-heal-timeout-seconds=10" in args and FLAG in args
    cm = objs[("ConfigMap", "argocd-notifications-cm")]["data"]
    catalog = yaml.safe_load(CATALOG.read_text())["data"]
    for key, value in catalog.items():
        assert cm[key] == value, key  # every catalog trigger and template, as the team has it
    assert cm["service.slack"] == "token: $slack-token\n"
    assert yaml.safe_load(cm["subscriptions"]) == [
        {"recipients": ["slack:deployments"], "triggers": ["on-sync-failed", "on-health-degraded"]}
    ]
    assert "service.webhook.driftguard" in cm and "template.driftguard-drift-detected" in cm


@pytest.mark.slow  # whole kustomize builds of the install
def test_the_default_subscriptions_component_fills_an_empty_list(tmp_path: Path) -> None:
    objs = objects(team_kustomization(tmp_path, subscriptions=False))
    [sub] = yaml.safe_load(objs[("ConfigMap", "argocd-notifications-cm")]["data"]["subscriptions"])
    assert sub["recipients"] == ["driftguard:alerts"]


def test_the_controller_flag_reaches_the_deployment_variant_too(tmp_path: Path) -> None:
    # Argo CD also ships the controller as a Deployment (manifests/base/application-controller-deployment)
    (tmp_path / "controller.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "argocd-application-controller"},
                "spec": {
                    "selector": {"matchLabels": {"app": "c"}},
                    "template": {
                        "metadata": {"labels": {"app": "c"}},
                        "spec": {"containers": [{"name": "c", "image": "c", "args": ["/usr/local/bin/c"]}]},
                    },
                },
            }
        )
    )
    (tmp_path / "kustomization.yaml").write_text(
        "resources: [controller.yaml, repo-server.yaml, notifications-cm.yaml]\n"
        f"components: [{os.path.relpath(COMPONENT, tmp_path)}]\n"
    )
    from .reference import install_object

    (tmp_path / "repo-server.yaml").write_text(
        yaml.safe_dump(install_object("Deployment", "argocd-repo-server"))
    )
    (tmp_path / "notifications-cm.yaml").write_text(
        yaml.safe_dump(install_object("ConfigMap", "argocd-notifications-cm"))
    )
    objs = objects(tmp_path)
    assert pod(objs, "Deployment", "argocd-application-controller")["containers"][0]["args"] == [
        "/usr/local/bin/c",
        FLAG,
    ]

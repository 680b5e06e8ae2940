"""The CMP's install pieces against Argo CD v3.5.1's real repo-server Deployment and Application CRD."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from .reference import ROOT, install_object, kustomize, validate


def patched_repo_server(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "repo-server.yaml").write_text(
        yaml.safe_dump(install_object("Deployment", "argocd-repo-server"))
    )
    shutil.copy(ROOT / "manifests/components/argocd/argocd-repo-server-patch.yaml", tmp_path / "patch.yaml")
    (tmp_path / "kustomization.yaml").write_text(
        "resources: [repo-server.yaml]\npatches:\n  - path: patch.yaml\n"
    )
    [deploy] = kustomize(tmp_path)
    return deploy


def test_sidecar_patch_applies_to_the_real_repo_server(tmp_path: Path) -> None:
    original = install_object("Deployment", "argocd-repo-server")
    deploy = patched_repo_server(tmp_path)
    spec = deploy["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in spec["containers"]}
    assert containers["argocd-repo-server"] == original["spec"]["template"]["spec"]["containers"][0]
    sidecar = containers["driftguard-cmp"]
    assert sidecar["command"] == ["/var/run/argocd/argocd-cmp-server"]
    assert (
        sidecar["securityContext"]["runAsUser"] == 999 and sidecar["securityContext"]["runAsNonRoot"] is True
    )
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    assert mounts["/var/run/argocd"]["name"] == "var-files"
    assert mounts["/home/argocd/cmp-server/plugins"]["name"] == "plugins"
    assert mounts["/home/argocd/cmp-server/config/plugin.yaml"]["subPath"] == "plugin.yaml"
    assert mounts["/tmp"]["name"] == "driftguard-cmp-tmp"
    repo_server_tmp = next(
        m["name"] for m in containers["argocd-repo-server"]["volumeMounts"] if m["mountPath"] == "/tmp"
    )
    assert repo_server_tmp != "driftguard-cmp-tmp"  # never share the repo-server's /tmp
    volumes = {v["name"] for v in spec["volumes"]}
    assert {m["name"] for m in sidecar["volumeMounts"]} <= volumes
    assert {v["name"] for v in original["spec"]["template"]["spec"]["volumes"]} <= volumes
    # the init container that provides argocd-cmp-server is Argo CD's own, untouched
    assert spec["initContainers"] == original["spec"]["template"]["spec"]["initContainers"]


def test_base_builds_and_carries_the_plugin_config() -> None:
    docs = kustomize(ROOT / "manifests/base")
    cm = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "driftguard-cmp-plugin"
    )
    assert cm["metadata"]["namespace"] == "argocd"
    plugin = yaml.safe_load(cm["data"]["plugin.yaml"])
    assert plugin["kind"] == "ConfigManagementPlugin" and plugin["metadata"]["name"] == "driftguard"


APP_FILES = sorted((ROOT / "manifests/examples/apps").glob("*.yaml")) + sorted(
    (ROOT / "examples/gitops/apps").glob("*.yaml")
)


@pytest.mark.parametrize("path", APP_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_example_applications_fit_the_real_crd(path: Path) -> None:
    for app in yaml.safe_load_all(path.read_text()):
        if app and app.get("kind") == "Application":
            validate(app, "argo-cd/application-crd.yaml", "v1alpha1")
            plugin = app["spec"]["source"].get("plugin")
            if plugin is not None:
                assert plugin["name"] == "driftguard"


def test_schema_check_catches_a_wrong_field() -> None:
    app = yaml.safe_load((ROOT / "manifests/examples/apps/payment-production.yaml").read_text())
    app["spec"]["source"]["plugin"]["parameters"][0]["array"] = "not-a-list"
    with pytest.raises(jsonschema.ValidationError):
        validate(app, "argo-cd/application-crd.yaml", "v1alpha1")


def test_sidecar_gets_its_own_projected_token_and_read_only_rbac(tmp_path: Path) -> None:
    deploy = patched_repo_server(tmp_path)
    spec = deploy["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False  # Argo CD's choice stays
    containers = {c["name"]: c for c in spec["containers"]}
    token_mounts = [
        m
        for m in containers["driftguard-cmp"]["volumeMounts"]
        if m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    ]
    assert token_mounts and token_mounts[0]["readOnly"] is True
    assert not any(
        m["name"] == token_mounts[0]["name"] for m in containers["argocd-repo-server"]["volumeMounts"]
    )
    volume = next(v for v in spec["volumes"] if v["name"] == token_mounts[0]["name"])
    sources = volume["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    docs = kustomize(ROOT / "manifests/base")
    role = next(d for d in docs if d["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": ["argoproj.io"], "resources": ["applications"], "verbs": ["get"]}]
    binding = next(d for d in docs if d["kind"] == "RoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": spec["serviceAccountName"], "namespace": "argocd"}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]

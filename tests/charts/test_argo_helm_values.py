"""examples/argo-helm/values.yaml with the real argo-helm argo-cd chart (tests/data/charts/argo-cd)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ARGO_CD_CHART = ROOT / "tests" / "data" / "charts" / "argo-cd"
VALUES = ROOT / "examples" / "argo-helm" / "values.yaml"


@functools.cache  # one render of the argo-cd chart (seconds); the tests only read it
def render() -> dict[tuple[str, str], dict[str, Any]]:
    cmd = [os.environ["DRIFTGUARD_HELM"], "template", "argocd", str(ARGO_CD_CHART), "-n", "argocd"]
    cmd += [
        "-f",
        str(VALUES),
        "--set-string",
        "notifications.secret.items.driftguard-notifier-token=t0ken-for-tests",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}


def test_the_values_file_is_what_the_generator_writes() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "argo_helm_values.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.slow  # the real argo-cd chart rendered
def test_the_sidecar_runs_in_the_repo_server_as_the_cmp_server_expects() -> None:
    objs = render()
    repo = objs[("Deployment", "argocd-repo-server")]
    kubernetes_validate.validate(repo, "1.32", strict=True)
    pod = repo["spec"]["template"]["spec"]
    # left as the chart (or the team) has it: the sidecar mounts its own projected token either way
    assert "automountServiceAccountToken" not in yaml.safe_load(VALUES.read_text())["repoServer"]
    sidecar = next(c for c in pod["containers"] if c["name"] == "driftguard-cmp")
    assert sidecar["command"] == ["/var/run/argocd/argocd-cmp-server"]
    assert sidecar["securityContext"]["runAsUser"] == 999  # argocd-cmp-server's uid
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    plugin = mounts["/home/argocd/cmp-server/config/plugin.yaml"]
    assert (plugin["name"], plugin["subPath"]) == ("argocd-cmp-cm", "driftguard.yaml")
    assert mounts["/tmp"]["name"] == "driftguard-cmp-tmp"  # its own /tmp, not the repo-server's
    assert {"/var/run/argocd", "/home/argocd/cmp-server/plugins"} <= set(mounts)
    volumes = {v["name"]: v for v in pod["volumes"]}
    # every mount has its volume: the chart's own (var-files, plugins) and ours
    assert {m["name"] for m in sidecar["volumeMounts"]} <= set(volumes)
    assert volumes["argocd-cmp-cm"]["configMap"]["name"] == "argocd-cmp-cm"
    assert "serviceAccountToken" in volumes["driftguard-cmp-token"]["projected"]["sources"][0]


def test_the_plugin_config_is_the_generated_one() -> None:
    from cmp_plugin.plugin_yaml import plugin_config_map

    cm = render()[("ConfigMap", "argocd-cmp-cm")]
    ours = yaml.safe_load(yaml.safe_load(plugin_config_map())["data"]["plugin.yaml"])
    assert yaml.safe_load(cm["data"]["driftguard.yaml"]) == ours


def test_notifications_reach_the_notifier() -> None:
    objs = render()
    cm = objs[("ConfigMap", "argocd-notifications-cm")]["data"]
    shipped: dict[str, str] = {}
    for component in ("argocd", "argocd-default-subscriptions"):
        path = ROOT / "manifests" / "components" / component / "argocd-notifications-cm-patch.yaml"
        [patch] = [d for d in yaml.safe_load_all(path.read_text()) if d]
        shipped.update(patch["data"])
    for key, value in shipped.items():
        if key == "subscriptions":
            assert yaml.safe_load(cm[key]) == yaml.safe_load(value)
        else:
            assert cm[key] == value, key
    service = yaml.safe_load(cm["service.webhook.driftguard"])
    assert {"name": "Authorization", "value": "Bearer $driftguard-notifier-token"} in service["headers"]
    secret = objs[("Secret", "argocd-notifications-secret")]
    assert "driftguard-notifier-token" in secret.get(
        "stringData", {}
    ) or "driftguard-notifier-token" in secret.get("data", {})


def test_the_sidecar_may_read_its_application() -> None:
    objs = render()
    role = objs[("Role", "driftguard-cmp-read-applications")]
    assert role["rules"] == [{"apiGroups": ["argoproj.io"], "resources": ["applications"], "verbs": ["get"]}]
    binding = objs[("RoleBinding", "driftguard-cmp-read-applications")]
    sa = objs[("ServiceAccount", "argocd-repo-server")]
    assert binding["subjects"][0]["name"] == sa["metadata"]["name"]


def test_the_controller_exports_the_condition_the_alert_reads() -> None:
    sts = render()[("StatefulSet", "argocd-application-controller")]
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--metrics-application-conditions=ComparisonError" in args

"""The notifier's install pieces against Argo CD v3.5.1's real argocd-notifications-cm, and our own API."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from driftguard.argocd_cm import system_rules_from_file
from notifier.alerts import RESOLVE_TRIGGERS
from notifier.webhook import validate

from .reference import ROOT, install_object, kustomize

SAMPLE_APP = {
    "metadata": {"name": "deepseek-inference", "namespace": "argocd"},
    "spec": {
        "project": "default",
        "destination": {"server": "https://kubernetes.default.svc", "namespace": "ai-serving"},
    },
    "status": {"sync": {"status": "OutOfSync", "revision": "abc"}, "health": {"status": "Healthy"}},
}


def go_template(body: str, app: dict[str, Any]) -> str:
    """Evaluate the two Go-template forms our bodies use: {{toJson .app.x.y}} and {{with .app.x}}{{toJson .y}}{{else}}null{{end}}."""

    def lookup(path: str, root: Any) -> Any:
        node = root
        for part in path.strip(".").split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return node

    def with_block(m: re.Match[str]) -> str:
        scope = lookup(m.group(1), {"app": app})
        return json.dumps(lookup(m.group(2), scope)) if scope else m.group(3)

    body = re.sub(
        r"\{\{with (\.[\w.]+)\}\}\{\{toJson (\.[\w.]+)\}\}\{\{else\}\}(\w+)\{\{end\}\}", with_block, body
    )
    return re.sub(r"\{\{toJson (\.[\w.]+)\}\}", lambda m: json.dumps(lookup(m.group(1), {"app": app})), body)


def patched_cm(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(install_object("ConfigMap", "argocd-notifications-cm")))
    shutil.copy(
        ROOT / "manifests/components/argocd/argocd-notifications-cm-patch.yaml", tmp_path / "patch.yaml"
    )
    shutil.copy(
        ROOT / "manifests/components/argocd-default-subscriptions/argocd-notifications-cm-patch.yaml",
        tmp_path / "subscriptions.yaml",
    )
    (tmp_path / "kustomization.yaml").write_text(
        "resources: [cm.yaml]\npatches:\n  - path: patch.yaml\n  - path: subscriptions.yaml\n"
    )
    [cm] = kustomize(tmp_path)
    return dict(cm["data"])


def test_service_sets_method_content_type_and_token_from_the_secret(tmp_path: Path) -> None:
    data = patched_cm(tmp_path)
    service = yaml.safe_load(data["service.webhook.driftguard"])
    headers = {h["name"]: h["value"] for h in service["headers"]}
    assert headers == {
        "Authorization": "Bearer $driftguard-notifier-token",
        "Content-Type": "application/json",
    }
    assert service["url"] == "http://driftguard-notifier.argocd.svc:8080"


def test_templates_post_json_our_webhook_accepts(tmp_path: Path) -> None:
    data = patched_cm(tmp_path)
    for name, trigger in (
        ("template.driftguard-drift-detected", "on-drift-detected"),
        ("template.driftguard-drift-resolved", "on-drift-resolved"),
    ):
        hook = yaml.safe_load(data[name])["webhook"]["driftguard"]
        assert hook["method"] == "POST" and hook["path"] == "/v1/notifications"
        for app in (
            SAMPLE_APP,
            {**SAMPLE_APP, "status": {**SAMPLE_APP["status"], "operationState": {"phase": "Succeeded"}}},
        ):
            body = json.loads(go_template(hook["body"], app))
            assert validate(body) == ("deepseek-inference", "argocd", trigger)
            assert body["app"]["spec"]["destination"]["namespace"] == "ai-serving"
    assert "on-drift-resolved" in RESOLVE_TRIGGERS


def test_triggers_and_subscriptions_reference_what_exists(tmp_path: Path) -> None:
    data = patched_cm(tmp_path)
    triggers = (
        "driftguard-on-drift-detected",
        "driftguard-on-drift-resolved",
        "driftguard-on-sync-failed",
        "driftguard-on-render-refused",
        "driftguard-on-prune-pending",
    )
    for trigger in triggers:
        [cond] = yaml.safe_load(data[f"trigger.{trigger}"])
        for template in cond["send"]:
            assert f"template.{template}" in data
    assert "OutOfSync" in data["trigger.driftguard-on-drift-detected"]
    [sub] = yaml.safe_load(data["subscriptions"])
    assert set(sub["triggers"]) == set(triggers)
    assert all(r.split(":")[0] == "driftguard" for r in sub["recipients"])


def test_notifier_deployment_is_non_root_with_a_pvc_and_probes() -> None:
    docs = kustomize(ROOT / "manifests/base")
    deploy = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "driftguard-notifier"
    )
    pod = deploy["spec"]["template"]["spec"]
    [c] = pod["containers"]
    assert (
        pod["securityContext"]["runAsUser"] == 999 and c["securityContext"]["readOnlyRootFilesystem"] is True
    )
    assert (
        c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    )
    claim = next(v for v in pod["volumes"] if v["name"] == "outbox")["persistentVolumeClaim"]["claimName"]
    assert any(d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"] == claim for d in docs)
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["DRIFTGUARD_NOTIFIER_OUTBOX"].startswith("/var/lib/driftguard/")
    assert deploy["spec"]["strategy"]["type"] == "Recreate"
    config = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "driftguard-notifier"
    )
    assert "channels" in yaml.safe_load(config["data"]["notifier.yaml"])


def test_argocd_cm_mounted_as_a_directory(tmp_path: Path) -> None:
    (tmp_path / "resource.customizations.ignoreDifferences.apps_Deployment").write_text(
        "jsonPointers:\n- /spec/replicas\n"
    )
    (tmp_path / "url").write_text("https://argocd.example.com")
    [rule] = system_rules_from_file(str(tmp_path))
    assert (rule.group, rule.kind, rule.json_pointers) == ("apps", "Deployment", ("/spec/replicas",))


def test_the_postgresql_variant_runs_three_replicas_and_the_sqlite_one_stays_the_default() -> None:
    default = {(o["kind"], o["metadata"]["name"]): o for o in kustomize(ROOT / "manifests/base/notifier")}
    ha = {
        (o["kind"], o["metadata"]["name"]): o
        for o in kustomize(ROOT / "manifests/examples/notifier-postgresql")
    }
    one = default[("Deployment", "driftguard-notifier")]["spec"]
    assert one["replicas"] == 1 and one["strategy"] == {"type": "Recreate"}
    assert ("PersistentVolumeClaim", "driftguard-notifier-outbox") in default
    assert "DRIFTGUARD_NOTIFIER_DATABASE_URL" not in json.dumps(one)

    spec = ha[("Deployment", "driftguard-notifier")]["spec"]
    assert spec["replicas"] == 3
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1},
    }
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    keys = {c["topologyKey"] for c in pod["topologySpreadConstraints"]}
    assert keys == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert all(
        c["labelSelector"]["matchLabels"].items() <= labels.items() for c in pod["topologySpreadConstraints"]
    )
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    for name in ("DRIFTGUARD_NOTIFIER_DATABASE_URL", "PGPASSWORD"):
        assert (
            "value" not in env[name]
            and env[name]["valueFrom"]["secretKeyRef"]["name"] == "driftguard-notifier-database"
        )
    assert ("PersistentVolumeClaim", "driftguard-notifier-outbox") not in ha
    assert "persistentVolumeClaim" not in json.dumps(pod["volumes"])  # no ReadWriteOnce volume pins a pod
    pdb = ha[("PodDisruptionBudget", "driftguard-notifier")]["spec"]
    assert pdb["maxUnavailable"] == 1 and pdb["selector"]["matchLabels"].items() <= labels.items()
    secret = yaml.safe_load(
        (ROOT / "manifests/base/notifier/postgresql/database-secret.template.yaml").read_text()
    )
    assert secret["metadata"]["name"] == "driftguard-notifier-database"
    assert set(secret["stringData"]) >= {"url", "password"} and "example.com" in secret["stringData"]["url"]

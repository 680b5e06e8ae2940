"""Issue 21's install pieces: the admission component builds on the base, the audit policy and kubeconfig parse."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from notifier.settings import ENV

from .reference import ROOT, kustomize


def built(
    tmp_path: Path, components: tuple[str, ...] = ("../../components/identity-admission",)
) -> dict[tuple[str, str], dict[str, Any]]:
    shutil.copytree(ROOT / "manifests", tmp_path / "manifests")
    overlay = tmp_path / "manifests" / "overlays" / "managed"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["../../base"],
                "components": list(components),
            }
        )
    )
    return {(d["kind"], d["metadata"]["name"]): d for d in kustomize(overlay)}


def test_the_admission_component_is_observe_only_over_tls(tmp_path: Path) -> None:
    docs = built(tmp_path)
    hook = docs[("ValidatingWebhookConfiguration", "driftguard-identity")]
    assert (
        hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        == "argocd/driftguard-notifier-admission"
    )
    [w] = hook["webhooks"]
    assert (w["failurePolicy"], w["sideEffects"], w["timeoutSeconds"]) == ("Ignore", "None", 2)
    assert w["clientConfig"]["service"] == {
        "name": "driftguard-notifier",
        "namespace": "argocd",
        "path": "/v1/admission",
        "port": 8443,
    }
    assert w["objectSelector"]["matchExpressions"][0]["key"] == "app.kubernetes.io/instance"
    conditions = " ".join(c["expression"] for c in w["matchConditions"])
    assert "startsWith('system:')" in conditions and "system:serviceaccounts" in conditions
    cert = docs[("Certificate", "driftguard-notifier-admission")]
    assert "driftguard-notifier.argocd.svc" in cert["spec"]["dnsNames"]

    deploy = docs[("Deployment", "driftguard-notifier")]
    containers = {c["name"]: c for c in deploy["spec"]["template"]["spec"]["containers"]}
    assert set(containers) == {"notifier", "admission"}
    env = {e["name"]: e.get("value") for e in containers["admission"]["env"]}
    assert env["DRIFTGUARD_NOTIFIER_WORKER"] == "false" and env["DRIFTGUARD_NOTIFIER_TLS_CERT"].endswith(
        "tls.crt"
    )
    assert all(
        name in ENV
        or name == "PGPASSWORD"
        or name.startswith(("DRIFTGUARD_ARGOCD_", "DRIFTGUARD_NOTIFIER_TLS_"))
        for name in env
    )
    mounts = {m["name"] for m in containers["admission"]["volumeMounts"]}
    volumes = {v["name"] for v in deploy["spec"]["template"]["spec"]["volumes"]}
    assert mounts <= volumes and "admission-tls" in volumes
    # its part only, and only its secrets: no channel config or secret, no Argo CD token
    command = containers["admission"]["command"]
    assert command[command.index("--part") + 1] == "admission"
    assert "envFrom" not in containers["admission"] and "config" not in mounts
    assert not {"DRIFTGUARD_NOTIFIER_CONFIG", "DRIFTGUARD_NOTIFIER_TOKEN", "DRIFTGUARD_ARGOCD_TOKEN"} & set(
        env
    )
    secret_keys = {
        e["valueFrom"]["secretKeyRef"]["key"]
        for e in containers["admission"]["env"]
        if e.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "driftguard-notifier"
    }
    assert secret_keys == {"DRIFTGUARD_NOTIFIER_AUDIT_TOKEN"}
    ports = {p["name"]: p["port"] for p in docs[("Service", "driftguard-notifier")]["spec"]["ports"]}
    assert ports == {"http": 8080, "admission": 8443}


@pytest.mark.parametrize("admission_first", [True, False])
def test_with_the_postgresql_variant_admission_records_go_to_the_shared_database(
    tmp_path: Path, admission_first: bool
) -> None:
    """The admission container writes where the notifier replicas read: the database from the Secret."""
    parts = ["../../components/identity-admission", "../../base/notifier/postgresql"]
    docs = built(tmp_path, tuple(parts if admission_first else parts[::-1]))
    pod = docs[("Deployment", "driftguard-notifier")]["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    assert set(containers) == {"notifier", "admission"}
    for name in ("notifier", "admission"):
        env = {e["name"]: e for e in containers[name]["env"]}
        for var in ("DRIFTGUARD_NOTIFIER_DATABASE_URL", "PGPASSWORD"):
            ref = env[var]["valueFrom"]["secretKeyRef"]
            assert ref["name"] == "driftguard-notifier-database" and "value" not in env[var], (name, var)
        mounts = {m["name"]: m["mountPath"] for m in containers[name]["volumeMounts"]}
        assert mounts["database-ca"] == "/etc/driftguard/database-ca"  # the URL's sslrootcert is there
    [ca] = [v for v in pod["volumes"] if v["name"] == "database-ca"]
    assert ca["secret"]["secretName"] == "driftguard-notifier-database"
    assert ("PersistentVolumeClaim", "driftguard-notifier-outbox") not in docs
    assert [v for v in pod["volumes"] if v["name"] == "outbox"] == [{"name": "outbox", "emptyDir": {}}]


def test_the_audit_policy_logs_writes_of_workload_and_config_kinds_at_metadata_level() -> None:
    policy = yaml.safe_load((ROOT / "manifests/audit/policy.yaml").read_text())
    assert policy["apiVersion"] == "audit.k8s.io/v1" and policy["kind"] == "Policy"
    [rule] = [r for r in policy["rules"] if r["level"] == "Metadata"]
    assert sorted(rule["verbs"]) == ["create", "delete", "patch", "update"]
    kinds = {(g["group"], r) for g in rule["resources"] for r in g["resources"]}
    assert {("apps", "deployments"), ("", "configmaps"), ("", "secrets")} <= kinds
    assert not any(r["level"] in ("Request", "RequestResponse") for r in policy["rules"])  # never bodies
    kubeconfig = yaml.safe_load((ROOT / "manifests/audit/webhook-kubeconfig.yaml").read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"].endswith("/v1/audit")
    flags = (ROOT / "manifests/audit/README.md").read_text()
    assert "--audit-webhook-config-file" in flags and "--audit-policy-file" in flags

"""The services' install paths against issue 31's attacks: secrets split by use, listeners fenced.

Rendered with the real kustomize and helm (tests/manifests/reference.py, tests/charts).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from analysis_provider.callers import parse_callers
from notifier.settings import ENV

from .reference import ROOT, kustomize

ROLLOUTS = ROOT / "manifests/examples/rollouts"


def _secret_refs(obj: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(obj, dict):
        if isinstance(obj.get("secretKeyRef"), dict):
            found.append(obj["secretKeyRef"])
        for v in obj.values():
            found.extend(_secret_refs(v))
    elif isinstance(obj, list):
        for v in obj:
            found.extend(_secret_refs(v))
    return found


def test_rollout_namespaces_hold_only_their_own_gate_token() -> None:
    """Before: every template read DRIFTGUARD_ANALYSIS_TOKEN from a Secret that also held the Argo CD token."""
    templates = [
        d for d in yaml.safe_load_all((ROLLOUTS / "cluster-analysis-templates.yaml").read_text()) if d
    ]
    refs = [r for t in templates for r in _secret_refs(t)]
    assert refs and all(r == {"name": "driftguard-gate", "key": "token"} for r in refs), refs
    [gate] = [d for d in yaml.safe_load_all((ROLLOUTS / "gate-token.template.yaml").read_text()) if d]
    assert set(gate["stringData"]) == {"token"}
    provider = yaml.safe_load((ROOT / "manifests/base/analysis/secret.template.yaml").read_text())
    assert provider["metadata"]["name"] != "driftguard-gate"
    assert "DRIFTGUARD_ARGOCD_TOKEN" in provider["stringData"]


def test_the_callers_template_is_a_valid_callers_file(tmp_path: Path) -> None:
    secret = yaml.safe_load((ROOT / "manifests/base/analysis/callers.template.yaml").read_text())
    data = secret["stringData"]
    for key, value in data.items():  # the Secret as mounted, placeholders filled
        (tmp_path / key).write_text(value if key == "callers.yaml" else f"{key}-0123456789abcdef")
    callers = parse_callers(yaml.safe_load(data["callers.yaml"]), base=tmp_path)
    by_name = {c.name: c for c in callers}
    assert by_name["payments"].allows(project="payments-eu", app="api")
    assert not by_name["payments"].allows(project="search", app="search-web")
    # the scrape token may read /metrics and ask about nothing
    assert not any(
        by_name["prometheus"].allows(project=p, app=a)
        for p in ("default", "payments", "*")
        for a in ("x", "*")
    )


def _build(tmp_path: Path, *components: str) -> dict[tuple[str, str], dict[str, Any]]:
    shutil.copytree(ROOT / "manifests", tmp_path / "manifests")
    overlay = tmp_path / "manifests" / "overlays" / "x"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["../../base"],
                "components": [f"../../components/{c}" for c in components],
            }
        )
    )
    return {(d["kind"], d["metadata"]["name"]): d for d in kustomize(overlay)}


def _admission_env(docs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    pod = docs[("Deployment", "driftguard-notifier")]["spec"]["template"]["spec"]
    [c] = [c for c in pod["containers"] if c["name"] == "admission"]
    return {e["name"]: e.get("value") for e in c["env"]}


def _ports(policy: dict[str, Any]) -> set[Any]:
    return {p["port"] for rule in policy["spec"]["ingress"] for p in rule.get("ports", [])}


def _listeners(docs: dict[tuple[str, str], dict[str, Any]], name: str) -> set[Any]:
    pod = docs[("Deployment", name)]["spec"]["template"]["spec"]
    return {p["name"] for c in pod["containers"] for p in c.get("ports", [])}


INSTALLS = [
    (),
    ("identity-admission",),
    ("identity-admission-noauth",),
    ("identity-audit",),
    ("gate-identity",),
]


@pytest.mark.parametrize("components", INSTALLS, ids=lambda c: "+".join(c) or "base")
def test_every_listener_has_a_network_policy(tmp_path: Path, components: tuple[str, ...]) -> None:
    """Before: manifests/ shipped no NetworkPolicy; any pod on the cluster network reached every port."""
    docs = _build(tmp_path, *components)
    policies = [d for (kind, _), d in docs.items() if kind == "NetworkPolicy"]
    for name in ("driftguard-notifier", "driftguard-analysis"):
        selected = [
            p for p in policies if p["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == name
        ]
        assert selected, name
        fenced = set().union(*(_ports(p) for p in selected))
        assert _listeners(docs, name) <= fenced, (name, _listeners(docs, name), fenced)


def test_the_admission_listener_authenticates_by_default(tmp_path: Path) -> None:
    """Before: the shipped component set DRIFTGUARD_NOTIFIER_ADMISSION_AUTH=none."""
    env = _admission_env(_build(tmp_path, "identity-admission"))
    assert env.get("DRIFTGUARD_NOTIFIER_ADMISSION_AUTH", "token") == "token"
    assert ENV["DRIFTGUARD_NOTIFIER_ADMISSION_AUTH"]  # the setting it would be
    kubeconfig = yaml.safe_load(
        (ROOT / "manifests/components/identity-admission/apiserver/admission-kubeconfig.yaml").read_text()
    )
    assert {u["name"] for u in kubeconfig["users"]} >= {"driftguard-notifier.argocd.svc:8443"}
    assert all("token" in u["user"] for u in kubeconfig["users"])
    config = yaml.safe_load(
        (ROOT / "manifests/components/identity-admission/apiserver/admission-config.yaml").read_text()
    )
    [plugin] = config["plugins"]
    assert plugin["name"] == "ValidatingAdmissionWebhook"
    assert plugin["configuration"]["kubeConfigFile"].endswith("admission-kubeconfig.yaml")


@pytest.mark.parametrize("components", INSTALLS, ids=lambda c: "+".join(c) or "base")
def test_none_only_behind_a_policy_that_admits_the_api_server_alone(
    tmp_path: Path, components: tuple[str, ...]
) -> None:
    docs = _build(tmp_path, *components)
    if ("Deployment", "driftguard-notifier") not in docs or "admission" not in _listeners(
        docs, "driftguard-notifier"
    ):
        return
    env = _admission_env(docs)
    if env.get("DRIFTGUARD_NOTIFIER_ADMISSION_AUTH", "token") != "none":
        return
    rules = [
        rule
        for (kind, _), p in docs.items()
        if kind == "NetworkPolicy"
        for rule in p["spec"]["ingress"]
        if any(port["port"] in ("admission", 8443) for port in rule.get("ports", []))
    ]
    assert rules
    for rule in rules:
        peers = rule.get("from")
        assert peers, "an admission rule without `from` admits every source"
        for peer in peers:
            assert set(peer) == {"ipBlock"}, peer  # no pod or namespace may reach it
            assert peer["ipBlock"]["cidr"] not in ("0.0.0.0/0", "::/0")


def test_the_noauth_component_is_the_only_none(tmp_path: Path) -> None:
    docs = _build(tmp_path, "identity-admission-noauth")
    assert _admission_env(docs)["DRIFTGUARD_NOTIFIER_ADMISSION_AUTH"] == "none"
    for path in (ROOT / "manifests").rglob("*.yaml"):
        if "identity-admission-noauth" in path.parts:
            continue
        assert 'DRIFTGUARD_NOTIFIER_ADMISSION_AUTH, value: "none"' not in path.read_text(), path

"""charts/driftguard with the real helm: valid Kubernetes objects, a schema that rejects typos,
monitoring only where the cluster serves it, and in step with the kustomize bases."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import promql_parser
import pytest
import yaml

from tests.manifests.reference import kustomize

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "driftguard"
EXAMPLE = ROOT / "examples" / "helm" / "values-production.yaml"
MONITORING = ["--api-versions", "monitoring.coreos.com/v1"]
# Argo CD's application-controller metrics the rules and the dashboard use
# (docs/operator-manual/metrics.md in argoproj/argo-cd), and Prometheus' own `up`
ARGO_METRICS = {"argocd_app_info", "argocd_app_condition", "argocd_app_sync_total", "up"}


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [os.environ["DRIFTGUARD_HELM"], "template", "driftguard", str(CHART), "-n", "argocd", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def render(*args: str) -> list[dict[str, Any]]:
    out = helm(*args)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def by_key(objs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


@pytest.mark.parametrize("values", [[], ["-f", str(EXAMPLE)]], ids=["defaults", "example"])
def test_every_object_is_valid_kubernetes(values: list[str]) -> None:
    objs = render(*values)
    kinds = sorted(o["kind"] for o in objs)
    assert kinds.count("Deployment") == 2 and "NetworkPolicy" in kinds
    for obj in objs:
        kubernetes_validate.validate(obj, "1.32", strict=True)


def test_helm_lint_is_clean() -> None:
    out = subprocess.run(
        [os.environ["DRIFTGUARD_HELM"], "lint", "--strict", str(CHART)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_validator_would_catch_a_mistake() -> None:
    [dep] = [o for o in render() if o["kind"] == "Deployment"][:1]
    dep["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, "1.32", strict=True)


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        # helm 4's JSON-schema messages (santhosh-tekuri/jsonschema: docs/helm4.md)
        ("notifer.enabled=false", "additional properties 'notifer' not allowed"),
        ("notifier.replicas=0", "at '/notifier/replicas': minimum: got 0, want 1"),
        ("notifier.replicas=3", "notifier.replicas > 1 needs the PostgreSQL outbox"),
        ("analysis.timeoutSeconds=30", "at '/analysis/timeoutSeconds': maximum: got 30, want 10"),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy': value must be one of"),
        ("argocd.url=argocd-server", "at '/argocd/url': 'argocd-server' does not match pattern"),
    ],
)
def test_the_schema_rejects_typos_and_unsafe_values(flag: str, message: str) -> None:
    out = helm("--set", flag)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr


def test_monitoring_objects_only_where_the_cluster_serves_them() -> None:
    assert not [o for o in render() if o["apiVersion"].startswith("monitoring.coreos.com/")]
    objs = by_key(render(*MONITORING))
    assert ("ServiceMonitor", "driftguard-notifier") in objs and (
        "ServiceMonitor",
        "driftguard-analysis",
    ) in objs
    assert ("PrometheusRule", "driftguard") in objs
    # /metrics needs the bearer token: the ServiceMonitor sends it from the service's own Secret
    auth = objs[("ServiceMonitor", "driftguard-notifier")]["spec"]["endpoints"][0]["authorization"]
    assert auth == {
        "type": "Bearer",
        "credentials": {"name": "driftguard-notifier", "key": "DRIFTGUARD_NOTIFIER_TOKEN"},
    }
    assert "NOTES" not in json.dumps(list(objs))


def rules() -> list[dict[str, Any]]:
    objs = by_key(render(*MONITORING))
    [group] = objs[("PrometheusRule", "driftguard")]["spec"]["groups"]
    return list(group["rules"])


def metric_names(expr: str) -> set[str]:
    """Every metric a PromQL expression selects, from the parser's own tree."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        name = getattr(node, "name", None)
        if isinstance(node, promql_parser.VectorSelector) and name:
            names.add(name)
        for attr in ("expr", "lhs", "rhs", "vector_selector", "param"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)
        for arg in getattr(node, "args", None) or []:
            walk(arg)

    walk(promql_parser.parse(expr))
    return names


def exported_metrics() -> set[str]:
    """What the two services export, read back from their own expositions."""
    from prometheus_client import REGISTRY, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    import analysis_provider.app  # noqa: F401 - its counters register in the default registry
    from notifier.metrics import NotifierMetrics

    notifier_text, _ = NotifierMetrics(["slack"], lambda: {"notifications": 0}).text()
    names: set[str] = set()
    for text in (notifier_text.decode(), generate_latest(REGISTRY).decode()):
        for family in text_string_to_metric_families(text):
            names.add(family.name)
            names.update(sample.name for sample in family.samples)
            if family.type == "counter":
                names.add(family.name + "_total")
            if family.type == "histogram":
                names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
    return names


def test_every_rule_parses_names_real_metrics_and_has_a_runbook() -> None:
    found = rules()
    assert {r["alert"] for r in found} >= {
        "DriftguardRenderRefused",
        "DriftguardDriftOpen",
        "DriftguardNotifierDeadLetters",
        "DriftguardNotifierNotReady",
        "DriftguardGatesNotReady",
        "DriftguardGateErrors",
        "ArgoCDAppOutOfSync",
        "ArgoCDAppUnhealthy",
        "ArgoCDAppSyncFailed",
    }
    exported = exported_metrics()
    runbooks = (ROOT / "docs" / "operations.md").read_text().lower()
    for rule in found:
        used = metric_names(rule["expr"])
        assert used, rule["expr"]
        unknown = {m for m in used if m not in ARGO_METRICS and m not in exported}
        assert not unknown, f"{rule['alert']} uses metrics nobody exports: {unknown}"
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        anchor = rule["annotations"]["runbook_url"].rsplit("#", 1)[1]
        assert f"### {anchor}" in runbooks, f"docs/operations.md has no runbook section for {rule['alert']}"
    assert next(r for r in found if r["alert"] == "DriftguardDriftOpen")["for"] == "30m"


def test_a_broken_expression_would_be_caught() -> None:
    with pytest.raises(Exception, match="unclosed"):
        promql_parser.parse("sum(rate(driftguard_notifier_sent_total[5m])")


def test_the_dashboard_is_json_whose_queries_parse_and_name_real_metrics() -> None:
    objs = by_key(render("--set", "monitoring.dashboard.enabled=true"))
    cm = objs[("ConfigMap", "driftguard-dashboard")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(cm["data"]["driftguard.json"])
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 9
    # drift by app (Argo CD's own view) and by class (driftguard's)
    assert any("argocd_app_info" in e and "by (name)" in e for e in exprs)
    assert any("driftguard_notifier_drift_changes_total" in e and "by (class)" in e for e in exprs)
    exported = exported_metrics()
    for expr in exprs:
        unknown = {m for m in metric_names(expr) if m not in ARGO_METRICS and m not in exported}
        assert not unknown, f"{expr} uses metrics nobody exports: {unknown}"


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """What must match between the chart and the kustomize base: everything but Helm's labels,
    annotations and the namespace kustomize sets."""
    obj = copy.deepcopy(obj)
    for meta in [obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata", {})]:
        meta.pop("labels", None)
        meta.pop("annotations", None)
        meta.pop("namespace", None)
    pod = obj.get("spec", {}).get("template", {}).get("spec", {})
    # the order of volumes and mounts means nothing to Kubernetes
    if "volumes" in pod:
        pod["volumes"].sort(key=lambda v: v["name"])
    for container in pod.get("containers", []):
        container.get("volumeMounts", []).sort(key=lambda m: m["name"])
        container.get("env", []).sort(key=lambda e: e["name"])  # no $(VAR) references between them
    return obj


def test_the_chart_and_the_kustomize_bases_stay_in_step() -> None:
    chart = by_key(render())
    base = by_key(kustomize(ROOT / "manifests" / "base"))
    shared = sorted(set(chart) & set(base))
    assert len(shared) >= 9, shared
    for key in shared:
        if key == ("ConfigMap", "driftguard-notifier"):
            # the same channels and routes, written by toYaml instead of by hand
            assert yaml.safe_load(chart[key]["data"]["notifier.yaml"]) == yaml.safe_load(
                base[key]["data"]["notifier.yaml"]
            )
            continue
        assert strip(chart[key]) == strip(base[key]), key


def test_the_plugin_config_is_the_one_the_parameter_table_generates() -> None:
    from cmp_plugin.plugin_yaml import plugin_config_map

    generated = yaml.safe_load(plugin_config_map())["data"]["plugin.yaml"]
    assert (CHART / "files" / "plugin.yaml").read_text() == generated
    assert re.search(r"name: driftguard\b", generated)


def test_the_postgresql_variant_matches_the_kustomize_component() -> None:
    chart = by_key(render("--set", "notifier.database.existingSecret=driftguard-notifier-database"))
    base = by_key(kustomize(ROOT / "manifests" / "examples" / "notifier-postgresql"))
    assert ("PersistentVolumeClaim", "driftguard-notifier-outbox") not in chart
    assert ("PersistentVolumeClaim", "driftguard-notifier-outbox") not in base
    for key in [("Deployment", "driftguard-notifier"), ("PodDisruptionBudget", "driftguard-notifier")]:
        assert strip(chart[key]) == strip(base[key]), key
    dep = chart[("Deployment", "driftguard-notifier")]
    assert dep["spec"]["replicas"] == 3 and dep["spec"]["strategy"]["type"] == "RollingUpdate"
    for obj in chart.values():
        kubernetes_validate.validate(obj, "1.32", strict=True)

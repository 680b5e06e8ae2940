"""The PrometheusRule and the dashboard read Argo CD's metrics as Argo CD v3.5.1 exports them.

The table of Argo CD's metrics (names, labels, when a series exists) is extracted from
controller/metrics/metrics.go at v3.5.1 (tests/reference/argo-cd/controller-metrics.yaml). Every
PromQL expression is parsed by a real parser (promql-parser) and its selectors checked against the
table; the alerts' selectors are evaluated over every Application state collectApps can export.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from .test_chart import MONITORING, by_key, render

ROOT = Path(__file__).resolve().parents[2]
TABLE = yaml.safe_load((ROOT / "tests" / "reference" / "argo-cd" / "controller-metrics.yaml").read_text())
# the labels Prometheus adds to a scraped series (kube-prometheus ServiceMonitor targets)
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}
# gitops-engine pkg/health and Argo CD's sync statuses: every value collectApps can export
SYNC = ("Synced", "OutOfSync", "Unknown")
HEALTH = ("Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown")


@functools.cache
def rules() -> tuple[dict[str, Any], ...]:
    [group] = by_key(render(*MONITORING))[("PrometheusRule", "driftguard")]["spec"]["groups"]
    return tuple(group["rules"])


def dashboard_exprs() -> list[str]:
    cm = by_key(render("--set", "monitoring.dashboard.enabled=true"))[("ConfigMap", "driftguard-dashboard")]
    return [t["expr"] for p in json.loads(cm["data"]["driftguard.json"])["panels"] for t in p["targets"]]


def walk(node: Any) -> Iterator[Any]:
    yield node
    for attr in ("expr", "lhs", "rhs", "vector_selector", "param"):
        child = getattr(node, attr, None)
        if child is not None and not isinstance(child, (str, int, float)):
            yield from walk(child)
    for arg in getattr(node, "args", None) or []:
        yield from walk(arg)


def selectors(expr: str) -> list[Any]:
    return [n for n in walk(promql_parser.parse(expr)) if isinstance(n, promql_parser.VectorSelector)]


def matches(selector: Any, series: dict[str, str]) -> bool:
    """Prometheus' matcher semantics: regexes are anchored, a missing label is the empty string."""
    for m in selector.matchers.matchers:
        value, op = series.get(m.name, ""), str(m.op)
        full = re.fullmatch(m.value, value) is not None
        if {"MatchOp.Equal": value != m.value, "MatchOp.NotEqual": value == m.value}.get(op, False):
            return False
        if (op == "MatchOp.Re" and not full) or (op == "MatchOp.NotRe" and full):
            return False
    return True


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_argo_cd_metrics_and_labels_are_the_ones_v3_5_1_exports(source: str) -> None:
    exprs = [r["expr"] for r in rules()] if source == "rules" else dashboard_exprs()
    used = 0
    for expr in exprs:
        tree = promql_parser.parse(expr)
        for node in walk(tree):
            if isinstance(node, promql_parser.VectorSelector) and str(node.name).startswith("argocd_"):
                used += 1
                assert node.name in TABLE, f"{expr}: {node.name} is no Argo CD v3.5.1 metric"
                known = set(TABLE[node.name]["labels"]) | TARGET_LABELS
                wrong = {m.name for m in node.matchers.matchers} - known
                assert not wrong, f"{expr}: {node.name} has no label {wrong}"
            if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
                inner = [s.name for s in selectors(node.expr.prettify()) if str(s.name).startswith("argocd_")]
                for name in inner:
                    extra = set(node.modifier.labels) - set(TABLE[name]["labels"]) - TARGET_LABELS
                    assert not extra, f"{expr}: groups {name} by {extra}, which it does not have"
    assert used >= 4


def test_the_checker_knows_the_old_mistake() -> None:
    # the label was `type` before this issue; Argo CD's is `condition`
    [sel] = selectors('argocd_app_condition{type="ComparisonError"}')
    assert {m.name for m in sel.matchers.matchers} - set(TABLE["argocd_app_condition"]["labels"]) == {"type"}


def controller_args() -> dict[str, list[str]]:
    """The controller arguments each install path adds."""
    component = ROOT / "manifests" / "components" / "argocd" / "argocd-application-controller-args.yaml"
    helm_values = yaml.safe_load((ROOT / "examples" / "argo-helm" / "values.yaml").read_text())
    return {
        "kustomize": [op["value"] for op in yaml.safe_load(component.read_text()) if op["op"] == "add"],
        "argo-helm": list(helm_values["controller"]["extraArgs"]),
    }


def test_every_flag_gated_metric_a_rule_reads_is_enabled_by_both_install_paths() -> None:
    needed: dict[str, set[str]] = {}
    for rule in rules():
        for sel in selectors(rule["expr"]):
            exported = TABLE.get(sel.name, {}).get("exported", "always")
            if exported.startswith("flag "):
                flag = exported.removeprefix("flag ")
                # the values the selector asks for must be among the flag's list
                wanted = {m.value for m in sel.matchers.matchers if m.name == "condition"}
                needed.setdefault(flag, set()).update(wanted)
    assert needed == {"--metrics-application-conditions": {"ComparisonError"}}
    for path, args in controller_args().items():
        for flag, values in needed.items():
            given_values = {
                v for a in args if a.startswith(flag + "=") for v in a.split("=", 1)[1].split(",")
            }
            assert values <= given_values, f"{path} does not set {flag}={','.join(sorted(values))}"


def test_a_series_created_by_its_first_event_is_caught_new() -> None:
    """increase() over a counter Argo CD creates on the first sync in a phase misses that sync: the
    rule must also catch the series that is there now and was not `offset` ago."""
    for rule in rules():
        tree = promql_parser.parse(rule["expr"])
        counted = {
            s.name
            for n in walk(tree)
            if isinstance(n, promql_parser.Call) and n.func.name in ("increase", "rate")
            for s in selectors(n.prettify())
            if TABLE.get(s.name, {}).get("exported") == "first-event"
        }
        for name in counted:
            new = [
                n
                for n in walk(tree)
                if isinstance(n, promql_parser.BinaryExpr)
                and str(n.op) == "unless"
                and isinstance(n.rhs, promql_parser.VectorSelector)
                and n.rhs.name == name
                and n.rhs.offset
            ]
            assert new, (
                f"{rule['alert']}: increase({name}) misses the first event and nothing else catches it"
            )


def test_driftguard_counters_a_rule_increases_exist_at_zero_from_start_up() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from notifier.metrics import NotifierMetrics

    channels = ["feishu-sre", "slack-sre", "oncall"]
    text, _ = NotifierMetrics(channels, lambda: {}).text()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }
    checked = 0
    for rule in rules():
        for node in walk(promql_parser.parse(rule["expr"])):
            if not (isinstance(node, promql_parser.Call) and node.func.name == "increase"):
                continue
            for sel in selectors(node.prettify()):
                if not sel.name.startswith("driftguard_notifier_"):
                    continue
                series = [(labels, v) for (name, labels), v in samples.items() if name == sel.name]
                assert series and all(v == 0 for _, v in series), f"{sel.name} is not there at 0"
                if sel.name == "driftguard_notifier_dead_letters_total":
                    assert {dict(labels)["channel"] for labels, _ in series} == set(channels)
                checked += 1
    assert checked >= 2


def app_series(sync: str, health: str, autosync: bool) -> dict[str, str]:
    # collectApps: argocd_app_info's labels, autosync_enabled from strconv.FormatBool
    return {
        "__name__": "argocd_app_info",
        "namespace": "argocd",
        "name": "shop",
        "project": "default",
        "autosync_enabled": "true" if autosync else "false",
        "sync_status": sync,
        "health_status": health,
    }


def alerts_for(series: dict[str, str]) -> set[str]:
    """The rules with an argocd_app_info selector that this one app's series satisfies."""
    return {
        r["alert"]
        for r in rules()
        for sel in selectors(r["expr"])
        if sel.name == "argocd_app_info" and not sel.offset and matches(sel, series)
    }


def expected(sync: str, health: str, autosync: bool) -> set[str]:
    """What should alert: written from the issue's rule, not from the rule file."""
    out = set()
    if sync == "Unknown":
        out.add("DriftguardRenderRefused")
    if sync == "OutOfSync" and autosync:
        out |= {"DriftguardDriftOpen", "ArgoCDAppOutOfSync"}
    if health not in ("Healthy", "Suspended"):
        out.add("ArgoCDAppUnhealthy")
    return out


@pytest.mark.parametrize(("sync", "health", "autosync"), list(itertools.product(SYNC, HEALTH, (True, False))))
def test_alerts_for_every_application_state(sync: str, health: str, autosync: bool) -> None:
    fired = alerts_for(app_series(sync, health, autosync))
    assert fired == expected(sync, health, autosync)
    critical = {r["alert"] for r in rules() if r["labels"]["severity"] == "critical"}
    if sync == "OutOfSync" and not autosync:
        assert not fired & critical  # manual sync: OutOfSync by design
    if health == "Suspended":
        assert "ArgoCDAppUnhealthy" not in fired  # a paused canary

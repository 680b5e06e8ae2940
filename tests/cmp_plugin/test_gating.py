"""gating.py and the implicit-defaults analysis on tricky templates."""

from __future__ import annotations

from pathlib import Path

from cmp_plugin.gating import find_gates, lookup, merge_values

DEPLOY = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"


def make_chart(root: Path, templates: dict[str, str], values: str = "", chart_extra: str = "") -> Path:
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text(f"apiVersion: v2\nname: t\nversion: 0.1.0\n{chart_extra}")
    (root / "values.yaml").write_text(values)
    for name, text in templates.items():
        (root / "templates" / name).write_text(text)
    return root


def keys(chart: Path) -> dict[str, tuple[str, int, str]]:
    return {g.key: (g.file, g.line, g.keyword) for g in find_gates(chart)}


def test_nested_keys_and_operators(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path,
        {
            "a.yaml": "{{- if and .Values.api.enabled (not .Values.api.legacy) }}\n"
            + DEPLOY
            + "{{- end }}\n",
            "b.yaml": '{{ if or (eq .Values.mode "full") (ne $.Values.tier "free") }}\n'
            + DEPLOY
            + "{{ end }}\n",
            "c.yaml": "{{- if (default true .Values.worker.on) }}\n" + DEPLOY + "{{- end }}\n",
            "d.yaml": '{{- if hasKey .Values.extra "cron" }}\n' + DEPLOY + "{{- end }}\n",
            "e.yaml": '{{- if dig "feature" "x" false .Values }}\n' + DEPLOY + "{{- end }}\n",
            "f.yaml": '{{- if index .Values.flags "beta" }}\n' + DEPLOY + "{{- end }}\n",
        },
    )
    found = keys(chart)
    for key in (
        "api.enabled",
        "api.legacy",
        "mode",
        "tier",
        "worker.on",
        "extra.cron",
        "feature.x",
        "flags.beta",
    ):
        assert key in found, key
    assert found["api.enabled"] == ("templates/a.yaml", 1, "if")


def test_else_if_and_else(tmp_path: Path) -> None:
    text = (
        "{{- if .Values.a }}\n"
        + DEPLOY
        + "{{- else if .Values.b }}\n"
        + DEPLOY.replace("Deployment", "StatefulSet")
        + "{{- end }}\n"
    )
    found = {g.key: g for g in find_gates(make_chart(tmp_path, {"x.yaml": text}))}
    assert found["a"].resources == ("Deployment {{ .Release.Name }}",)
    assert found["b"].keyword == "else if" and found["b"].resources == ("StatefulSet {{ .Release.Name }}",)
    assert found["b"].line == 6


def test_with_block_scopes_the_dot(tmp_path: Path) -> None:
    text = "{{- with .Values.redis }}\n{{- if .persistence.enabled }}\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n{{- end }}\n{{- end }}\n"
    found = keys(make_chart(tmp_path, {"pvc.yaml": text}))
    assert "redis" in found and "redis.persistence.enabled" in found


def test_conditions_without_resources_do_not_gate(tmp_path: Path) -> None:
    text = (
        DEPLOY
        + "spec:\n  replicas: {{ if .Values.big }}10{{ else }}1{{ end }}\n{{- if .Values.debug }}\n  paused: true\n{{- end }}\n"
    )
    assert keys(make_chart(tmp_path, {"d.yaml": text})) == {}


def test_helpers_reached_by_include(tmp_path: Path) -> None:
    helpers = '{{- define "t.monitor" -}}\n{{- if .Values.metrics.enabled }}\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: m\n{{- end }}\n{{- end -}}\n'
    helpers += '{{- define "t.labels" -}}\napp: x\n{{- end -}}\n'
    user = '{{- if .Values.monitoring }}\n{{ include "t.monitor" . }}\n{{- end }}\n{{- if .Values.labels }}\nmetadata:\n  labels: {{ include "t.labels" . }}\n{{- end }}\n'
    found = keys(make_chart(tmp_path, {"_helpers.tpl": helpers, "m.yaml": user}))
    assert found["metrics.enabled"][0] == "templates/_helpers.tpl"
    assert "monitoring" in found  # gates an include of a define with resources
    assert "labels" not in found  # the define it includes holds no resource


def test_subchart_condition_tags_and_scoped_templates(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path,
        {"d.yaml": DEPLOY},
        chart_extra="dependencies:\n  - name: redis\n    version: 1.0.0\n    condition: redis.enabled,cache.enabled\n    alias: cache\n  - name: extras\n    version: 1.0.0\n    tags: [batch]\n",
    )
    sub = tmp_path / "charts" / "redis"
    make_chart(
        sub,
        {
            "pvc.yaml": "{{- if .Values.persistence }}\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n{{- end }}\n"
        },
    )
    found = keys(chart)
    assert found["redis.enabled"][2] == "condition" and found["cache.enabled"][0] == "Chart.yaml"
    assert found["tags.batch"][2] == "tags"
    assert found["cache.persistence"] == ("charts/redis/templates/pvc.yaml", 1, "if")


def test_chart_without_gates(tmp_path: Path) -> None:
    assert find_gates(make_chart(tmp_path, {"d.yaml": DEPLOY})) == []


def test_lookup_counts_false_null_zero_as_set() -> None:
    values = {"a": {"enabled": False}, "b": None, "c": {"n": 0}, "d": {"x": {"y": None}}}
    assert lookup(values, "a.enabled") == (True, False)
    assert lookup(values, "b.enabled") == (True, None)  # an ancestor set to null decides it
    assert lookup(values, "c.n") == (True, 0)
    assert lookup(values, "d.x.y") == (True, None)
    assert lookup(values, "e.f") == (False, None)


def test_merge_like_helm() -> None:
    assert merge_values({"a": {"b": 1, "c": 2}, "d": 1}, {"a": {"b": 3}, "d": None}) == {
        "a": {"b": 3, "c": 2}
    }

"""helmchart/switches.py, template_lexer.py, chart_values.py and the implicit-defaults verdicts on tricky templates."""

from __future__ import annotations

from pathlib import Path

from cmp_plugin.guards.implicit_defaults import summary_line
from cmp_plugin.helmchart import chart_values as cv
from cmp_plugin.helmchart.helmignore import Rules, go_match
from cmp_plugin.helmchart.implicit import (
    CANDIDATE,
    DISABLED,
    FALSY,
    FINDING,
    NOT_DECIDING,
    NOT_ON,
    NOT_RENDERED,
    SET,
    Finding,
    all_gates,
    classify,
    prepare,
)
from cmp_plugin.helmchart.template_lexer import actions, expression_keys, scan_template
from cmp_plugin.scan import Doc

DEPLOY = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"


def make_chart(root: Path, templates: dict[str, str], values: str = "", chart_extra: str = "") -> Path:
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text(f"apiVersion: v2\nname: {root.name}\nversion: 0.1.0\n{chart_extra}")
    (root / "values.yaml").write_text(values)
    for name, text in templates.items():
        (root / "templates" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "templates" / name).write_text(text)
    return root


def keys(chart: Path) -> dict[str, tuple[str, int, str]]:
    return {g.key: (g.file, g.line, g.keyword) for g in all_gates(prepare(chart, []))}


def doc(kind: str, name: str, source: str) -> Doc:
    return Doc("v1", kind, name, "", source, 1)


def test_nested_keys_and_operators(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "t",
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
            "g.yaml": "{{- $svc := .Values.svc }}\n{{- if $svc.enabled }}\n" + DEPLOY + "{{- end }}\n",
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
    assert found["svc.enabled"] == ("templates/g.yaml", 2, "if")


def test_the_gate_text_is_exactly_as_written_and_reads_back(tmp_path: Path) -> None:
    text = '{{- if  and .Values.a\n   (eq .Values.b "}}") }}\n' + DEPLOY + "{{- end }}\n"
    gates = all_gates(prepare(make_chart(tmp_path / "t", {"x.yaml": text}), []))
    assert {g.key for g in gates} == {"a", "b"}
    assert {g.expr for g in gates} == {'and .Values.a (eq .Values.b "}}")'}
    for g in gates:
        assert set(expression_keys(g.expr, dot=g.dot, variables=g.variables, scope=g.scope)) == {"a", "b"}


def test_else_if_and_else(tmp_path: Path) -> None:
    text = (
        "{{- if .Values.a }}\n"
        + DEPLOY
        + "{{- else if .Values.b }}\n"
        + DEPLOY.replace("Deployment", "StatefulSet")
        + "{{- end }}\n"
    )
    found = {g.key: g for g in all_gates(prepare(make_chart(tmp_path / "t", {"x.yaml": text}), []))}
    assert found["a"].resources == ("Deployment",)
    assert found["b"].keyword == "else if" and found["b"].resources == ("StatefulSet",)
    assert found["b"].line == 6


def test_with_block_scopes_the_dot(tmp_path: Path) -> None:
    text = "{{- with .Values.redis }}\n{{- if .persistence.enabled }}\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n{{- end }}\n{{- end }}\n"
    gates = {g.key: g for g in all_gates(prepare(make_chart(tmp_path / "t", {"pvc.yaml": text}), []))}
    assert set(gates) == {"redis", "redis.persistence.enabled"}
    inner = gates["redis.persistence.enabled"]
    assert inner.expr == ".persistence.enabled" and inner.dot == "redis"
    assert expression_keys(inner.expr, dot=inner.dot) == ["redis.persistence.enabled"]


def test_conditions_that_only_shape_content_are_not_gates(tmp_path: Path) -> None:
    text = (
        DEPLOY
        + "spec:\n  replicas: {{ if .Values.big }}10{{ else }}1{{ end }}\n{{- if .Values.debug }}\n  paused: true\n{{- end }}\n"
        + "  issuerRef:\n{{- if .Values.issuer }}\n    kind: ClusterIssuer\n{{- end }}\n"
    )
    scan = prepare(make_chart(tmp_path / "t", {"d.yaml": text}), []).scan
    assert scan.gates == [] and scan.content_only == 3


def test_a_kind_switch_inside_a_document_is_not_a_whole_resource(tmp_path: Path) -> None:
    text = "apiVersion: apps/v1\n{{- if .Values.sts }}\nkind: StatefulSet\n{{- else }}\nkind: Deployment\n{{- end }}\nmetadata:\n  name: x\n"
    assert keys(make_chart(tmp_path / "t", {"d.yaml": text})) == {}


def test_helpers_reached_by_include(tmp_path: Path) -> None:
    helpers = '{{- define "t.monitor" -}}\n{{- if .Values.metrics.enabled }}\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: m\n{{- end }}\n{{- end -}}\n'
    helpers += '{{- define "t.labels" -}}\napp: x\n{{- end -}}\n'
    user = '{{- if .Values.monitoring }}\n{{ include "t.monitor" . }}\n{{- end }}\n'
    user += '{{- if .Values.labels }}\nmetadata:\n  labels: {{ include "t.labels" . }}\n{{- end }}\n'
    user += '{{- if .Values.indented }}\nspec:\n  {{- include "t.monitor" . | nindent 2 }}\n{{- end }}\n'
    gates = {
        g.key: g
        for g in all_gates(prepare(make_chart(tmp_path / "t", {"_helpers.tpl": helpers, "m.yaml": user}), []))
    }
    assert gates["metrics.enabled"].file == "templates/_helpers.tpl"
    assert gates["metrics.enabled"].sources == ("templates/m.yaml",)  # rendered under m.yaml's # Source
    assert gates["monitoring"].resources == ("ServiceMonitor",)  # an include of a define with documents
    assert "labels" not in gates  # the define it includes holds no resource
    assert "indented" not in gates  # re-indented output is content, not a document


def test_comments_strings_and_an_unclosed_action(tmp_path: Path) -> None:
    text = (
        '{{/* {{ if .Values.nope }} */}}\n{{- if .Values.a }}\n{{ "}}" }}\n'
        + DEPLOY
        + "{{- end }}\n---\n{{ if .Values.b }}\n"
        + DEPLOY
    )
    text += '{{ end }}\n{{ "unterminated\n---\n{{- if .Values.c }}\n' + DEPLOY + "{{- end }}\n"
    sc = scan_template(text)
    assert [s.expr for s, _ in sc.gates] == [".Values.a", ".Values.b"]  # c is after the unclosed action
    assert not sc.complete
    assert [b for _, _, b in actions("{{- /* c }} */ -}}x{{ 'a' }}")] == [None, "'a'"]


def test_helmignored_templates_are_not_read(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "t",
        {"a.yaml": "{{ if .Values.a }}\n" + DEPLOY + "{{ end }}\n", "skip/b.yaml": "{{ if .Values.b }}\n" + DEPLOY + "{{ end }}\n",
         ".hidden.yaml": "{{ if .Values.h }}\n" + DEPLOY + "{{ end }}\n"},
    )  # fmt: skip
    (chart / ".helmignore").write_text("# helm leaves these out\ntemplates/skip/\n")
    prep = prepare(chart, [])
    assert keys(chart).keys() == {"a"} and prep.scan.ignored == 2


def test_helmignore_rules_like_helm() -> None:
    assert go_match("*.swp", "a.swp") and not go_match("*.swp", "a/b.swp")
    assert go_match("[a-c]x", "bx") and not go_match("[^a-c]x", "bx") and not go_match("a[", "a[")
    rules = Rules("tests/\n*.tgz\n/top.txt\n")
    assert not rules.keeps("templates/tests/t.yaml") and not rules.keeps("charts/x.tgz")
    assert not rules.keeps("top.txt") and rules.keeps("templates/top.yaml")
    assert not rules.keeps("templates/.x.yaml")  # helm's own default: dotfiles in templates/
    assert not Rules("!keep.yaml\n").keeps("templates/other.yaml")  # helm's negation quirk


def subchart_chart(tmp_path: Path, *, redis_default: str = "true") -> Path:
    chart = make_chart(
        tmp_path / "web",
        {"d.yaml": "{{- if .Values.web.enabled }}\n" + DEPLOY + "{{- end }}\n"},
        values=f"web:\n  enabled: true\nredis:\n  enabled: {redis_default}\n",
        chart_extra="dependencies:\n  - name: redis\n    version: 1.0.0\n    condition: redis.enabled\n"
        "    import-values:\n      - child: exported\n        parent: fromredis\n"
        "  - name: batch\n    version: 1.0.0\n    tags: [jobs]\n",
    )
    make_chart(
        chart / "charts" / "redis",
        {"pvc.yaml": "{{- if .Values.persistence }}\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n{{- end }}\n"
         "---\n{{- if .Values.global.metrics }}\napiVersion: v1\nkind: Service\nmetadata:\n  name: m\n{{- end }}\n"},
        values="persistence: {size: 1Gi}\nexported:\n  backup: true\nglobal:\n  metrics: true\n",
    )  # fmt: skip
    make_chart(
        chart / "charts" / "batch", {"j.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n"}
    )
    return chart


def verdicts(chart: Path, supplied: list[dict], docs: list[Doc]) -> dict[str, Finding]:
    return {f.gate.key: f for f in classify(prepare(chart, supplied), docs)}


def test_subchart_condition_tags_globals_and_import_values(tmp_path: Path) -> None:
    chart = subchart_chart(tmp_path)
    rendered = [
        doc("Deployment", "web", "web/templates/d.yaml"),
        doc("PersistentVolumeClaim", "data", "web/charts/redis/templates/pvc.yaml"),
        doc("Service", "m", "web/charts/redis/templates/pvc.yaml"),
        doc("Job", "j", "web/charts/batch/templates/j.yaml"),
    ]
    found = verdicts(chart, [], rendered)
    # the scan proposes; the renders that prove them are in test_implicit_proof.py
    assert found["redis.enabled"].gate.keyword == "condition" and found["redis.enabled"].verdict == CANDIDATE
    assert found["redis.persistence"].verdict == CANDIDATE and found["redis.persistence"].flip is None
    assert found["global.metrics"].verdict == CANDIDATE  # a subchart's global reads the top-level key
    assert "tags.jobs" not in found  # no tags table: tags decide nothing
    prep = prepare(chart, [])
    assert cv.lookup(prep.defaults, "fromredis.backup") == (True, True)  # import-values of an enabled chart


def test_a_disabled_subchart_gates_nothing(tmp_path: Path) -> None:
    chart = subchart_chart(tmp_path, redis_default="false")
    found = verdicts(chart, [{"tags": {"jobs": False}}], [doc("Deployment", "web", "web/templates/d.yaml")])
    assert (
        found["redis.persistence"].verdict == DISABLED and found["redis.persistence"].why == "redis.enabled"
    )
    assert found["redis.enabled"].verdict == NOT_ON  # false, and its condition is a plain truth test
    assert found["tags.jobs"].verdict == SET
    assert cv.lookup(prepare(chart, []).defaults, "fromredis")[0] is False  # nothing imported from it
    on = verdicts(chart, [{"redis": {"enabled": True}}], [])
    assert on["redis.enabled"].verdict == SET and on["redis.persistence"].verdict != DISABLED


def test_verdicts_for_the_environment(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "app",
        {
            "d.yaml": "{{- if .Values.enabled }}\n" + DEPLOY + "{{- end }}\n",
            "pdb.yaml": "{{- with .Values.pdb }}\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: p\n{{- end }}\n",
            "m.yaml": "{{- if .Values.metrics }}\napiVersion: v1\nkind: Service\nmetadata:\n  name: m\n{{- end }}\n",
            "np.yaml": "{{- if or .Values.np.create .Values.global.np }}\napiVersion: v1\nkind: NetworkPolicy\nmetadata:\n  name: n\n{{- end }}\n",
            "k.yaml": '{{- if eq .Values.kind "Deployment" }}\napiVersion: v1\nkind: Deployment\nmetadata:\n  name: k\n{{- end }}\n',
        },
        values='enabled: true\npdb: {}\nmetrics: true\nnp: {create: true}\nglobal: {np: true}\nkind: "Deployment"\n',
    )
    docs = [
        doc("Deployment", "app", "app/templates/d.yaml"),
        doc("NetworkPolicy", "n", "app/templates/np.yaml"),
        doc("Deployment", "k", "app/templates/k.yaml"),
    ]
    found = verdicts(chart, [], docs)
    assert found["enabled"].verdict == CANDIDATE and found["enabled"].flip is False
    assert found["pdb"].verdict == FALSY
    assert found["metrics"].verdict == NOT_RENDERED
    # `or` of two true defaults: turning either off keeps the NetworkPolicy, neither decides it
    assert found["np.create"].verdict == found["global.np"].verdict == NOT_DECIDING
    assert found["kind"].verdict == CANDIDATE and found["kind"].flip == ""  # a string flips to empty
    assert verdicts(chart, [{"global": {"np": False}}], docs)["np.create"].verdict == CANDIDATE
    assert verdicts(chart, [{"enabled": True}], docs)["enabled"].verdict == SET
    assert verdicts(chart, [cv.set_values(["enabled=false"])], [])["enabled"].verdict == SET


def test_the_warn_line() -> None:
    def finding(key: str, res: str) -> Finding:
        from cmp_plugin.helmchart.switches import Gate

        return Finding(
            Gate(key, "templates/x.yaml", 1, "if", f".Values.{key}", ("Deployment",)),
            False,
            True,
            True,
            True,
            FINDING,
            (res,),
        )

    line = summary_line(
        [finding("enabled", "Deployment payment"), finding("metrics.enabled", "ServiceMonitor payment")]
    )
    assert line == (
        "driftguard: note: 2 resource switches rely on chart defaults: enabled (Deployment payment), "
        "metrics.enabled (ServiceMonitor payment); set them in this environment's values to pin them "
        "(driftguard-cmp render --explain lists each with template:line)"
    )
    many = summary_line([finding(f"k{i}", f"Service s{i}") for i in range(6)] + [finding("k0", "Service s0")])
    assert many.startswith(
        "driftguard: note: 6 resource switches rely on chart defaults: k0 (Service s0), k1"
    )
    assert ", k3 (Service s3), ... ; set them" in many and "k4" not in many


def test_set_values_like_helm_strvals() -> None:
    assert cv.set_values(["a.b=true", "c=1", "d=x", r"e\.f=null", "g[0].h=2"]) == {
        "a": {"b": True}, "c": 1, "d": "x", "e.f": None, "g": {"h": 2},
    }  # fmt: skip
    assert cv.set_values({"a.b": "true"}, kind="string") == {"a": {"b": "true"}}


def test_lookup_counts_false_null_zero_as_set() -> None:
    values = {"a": {"enabled": False}, "b": None, "c": {"n": 0}, "d": {"x": {"y": None}}}
    assert cv.lookup(values, "a.enabled") == (True, False)
    assert cv.lookup(values, "b.enabled") == (True, None)  # an ancestor set to null decides it
    assert cv.lookup(values, "c.n") == (True, 0)
    assert cv.lookup(values, "d.x.y") == (True, None)
    assert cv.lookup(values, "e.f") == (False, None)


def test_merge_like_helm() -> None:
    assert cv.merge_values({"a": {"b": 1, "c": 2}, "d": 1}, {"a": {"b": 3}, "d": None}) == {
        "a": {"b": 3, "c": 2}
    }


def test_the_scan_is_cached_by_template_content(tmp_path: Path) -> None:
    from cmp_plugin.helmchart.switches import scan_chart

    chart = make_chart(tmp_path / "t", {"d.yaml": "{{- if .Values.a }}\n" + DEPLOY + "{{- end }}\n"})
    cache = tmp_path / "cache"
    first = scan_chart(chart, cache_dir=cache)
    again = scan_chart(chart, cache_dir=cache)
    assert first.work > 0 and again.work == 0 and again.gates == first.gates  # read back, not rescanned
    (chart / "templates" / "d.yaml").write_text("{{- if .Values.b }}\n" + DEPLOY + "{{- end }}\n")
    changed = scan_chart(chart, cache_dir=cache)
    assert changed.work > 0 and [g.key for g in changed.gates] == ["b"]
    for entry in cache.glob("gates-*.json"):
        entry.write_text("{not json")
    assert scan_chart(chart, cache_dir=cache).gates == changed.gates  # a broken entry is rescanned


def test_a_subchart_symlinked_to_its_parent_does_not_recurse(tmp_path: Path) -> None:
    chart = make_chart(tmp_path / "t", {"d.yaml": "{{- if .Values.a }}\n" + DEPLOY + "{{- end }}\n"})
    (chart / "charts").mkdir()
    (chart / "charts" / "loop").symlink_to(chart, target_is_directory=True)
    deps = cv.dependencies(chart)
    assert 0 < len(deps) <= cv.MAX_DEPTH

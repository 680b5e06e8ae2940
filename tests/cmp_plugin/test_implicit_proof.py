"""implicit-defaults: the template scan proposes, a helm render with the key flipped proves.

Every chart here is rendered by the real helm; each test counts the proof's renders instead of
timing them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cmp_plugin import pipeline
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.guards.implicit_defaults import NOTE, ImplicitDefaultsGuard, explain
from cmp_plugin.helmchart.implicit import (
    CANDIDATE,
    FINDING,
    HOOKS_ONLY,
    NOT_PROVEN,
    PENDING,
    REMOVES_NOTHING,
    REPEATS,
    SET,
    Finding,
)
from cmp_plugin.settings import CmpSettings
from driftguard.errors import GuardRefusal

CHARTS = Path(__file__).resolve().parents[1] / "data" / "charts"
DEPLOY = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"


def make_chart(root: Path, templates: dict[str, str], values: str) -> Path:
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text(f"apiVersion: v2\nname: {root.name}\nversion: 0.1.0\n")
    (root / "values.yaml").write_text(values)
    for name, text in templates.items():
        (root / "templates" / name).write_text(text)
    return root


def render(
    chart: Path, *, values: tuple[str, ...] = (), mode: str = "warn", namespace: str = "apps"
) -> pipeline.Outcome:
    overrides: dict[str, object] = {"implicit-defaults": mode}
    if values:
        overrides["values-files"] = list(values)
    params, explicit = parse_parameters({}, overrides)
    env = AppEnv(app_name="app", app_namespace=namespace, params=params, explicit=explicit)
    return pipeline.run(
        chart,
        repo_root=chart.parent,
        env=env,
        settings=CmpSettings.from_env(),
        guards=(ImplicitDefaultsGuard(),),
    )


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DRIFTGUARD_CMP_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def switches(outcome: pipeline.Outcome) -> dict[str, Finding]:
    found = outcome.notes[NOTE]
    assert isinstance(found, list)
    return {f.gate.key: f for f in found}


def renders(outcome: pipeline.Outcome) -> int:
    n = outcome.notes[NOTE + "-renders"]
    assert isinstance(n, int)
    return n


def test_the_seed_case_production_relies_on_the_enabled_default(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "payment",
        {"deployment.yaml": "{{- if .Values.enabled }}\n" + DEPLOY + "{{- end }}\n"},
        "enabled: true\n",
    )
    (tmp_path / "staging.yaml").write_text("enabled: true\n")
    (tmp_path / "production.yaml").write_text("replicas: 3\n")
    prod = switches(render(chart, values=("../production.yaml",)))
    assert prod["enabled"].verdict == FINDING
    assert prod["enabled"].rendered == ("Deployment web",) and prod["enabled"].flip is False
    staging = switches(render(chart, values=("../staging.yaml",)))
    assert staging["enabled"].verdict == SET
    with pytest.raises(GuardRefusal) as refused:
        render(chart, values=("../production.yaml",), mode="refuse")
    assert refused.value.gating == [("enabled", "chart-default", "templates/deployment.yaml:1")]


def test_a_false_default_under_not_keeps_a_resource_rendering(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "app",
        {
            "svc.yaml": "{{- if and .Values.enabled (not $.Values.legacyService) }}\n"
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n{{- end }}\n",
            "legacy.yaml": "{{- if .Values.legacyService }}\n"
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web-legacy\n{{- end }}\n",
        },
        "enabled: true\nlegacyService: false\n",
    )
    found = switches(render(chart))
    legacy = found["legacyService"]
    assert legacy.verdict == FINDING and legacy.flip is True and legacy.default is False
    assert legacy.rendered == ("Service web",)  # the legacy Service it would add is not a removal
    assert found["enabled"].verdict == FINDING and found["enabled"].rendered == ("Service web",)


def test_defaults_kept_under_another_root_key_istio(tmp_path: Path) -> None:
    """Istio's base chart: every default sits under ``_internal_defaults_do_not_set``."""
    outcome = render(CHARTS / "istio-base", namespace="istio-system")
    found = switches(outcome)
    scope = found["global.resourceScope"]
    assert scope.verdict == FINDING and scope.origin == "_internal_defaults_do_not_set"
    assert scope.default == "all" and scope.flip == ""
    crds = [r for r in scope.rendered if r.startswith("CustomResourceDefinition ")]
    assert len(crds) == 15 and len(scope.rendered) == len(outcome.docs) == 17  # exact, no cap at 8
    assert found["global.enableReaderRBAC"].rendered == ("ServiceAccount istio-reader-service-account",)
    # its false branch prints the same CRDs from a file: turning it off removes nothing
    assert found["base.enableCRDTemplates"].verdict == REMOVES_NOTHING
    lines = explain(list(outcome.notes[NOTE]))  # type: ignore[arg-type]
    assert any(
        line.startswith("  global.resourceScope: templates/crds.yaml:1 ")
        and 'chart default "all" (under _internal_defaults_do_not_set)' in line
        and line.endswith("removes 17")
        for line in lines
    )


def test_a_gate_is_not_credited_with_another_block_of_its_file(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "app",
        {
            "cm.yaml": "{{- if .Values.extra.enabled }}\n{{- range .Values.extra.items }}\n---\n"
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ . }}\n{{- end }}\n{{- end }}\n"
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: always\n"
        },
        "extra:\n  enabled: true\n  items: []\n",
    )
    outcome = render(chart)
    found = switches(outcome)
    assert found["extra.enabled"].verdict == REMOVES_NOTHING and found["extra.enabled"].rendered == ()
    assert [w for w in outcome.warnings if "chart default" in w] == []
    assert any(
        line.startswith("  extra.enabled: templates/cm.yaml:1 ") and line.endswith(REMOVES_NOTHING)
        for line in explain(list(outcome.notes[NOTE]))  # type: ignore[arg-type]
    )


def test_keys_that_gate_only_hooks_are_not_findings(tmp_path: Path) -> None:
    hook = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {n}\n  annotations:\n    {a}\n"
    chart = make_chart(
        tmp_path / "app",
        {
            "test.yaml": "{{- if .Values.tests.enabled }}\n"
            + hook.format(n="t", a='"helm.sh/hook": test')
            + "{{- end }}\n",
            "pre.yaml": "{{- if .Values.migrate.enabled }}\n"
            + hook.format(n="m", a='"helm.sh/hook": pre-install,pre-upgrade')
            + "{{- end }}\n",
            "argo.yaml": "{{- if .Values.argoHook }}\n"
            + hook.format(n="a", a='"argocd.argoproj.io/hook": PostSync')
            + "{{- end }}\n",
            "skip.yaml": "{{- if .Values.skipped }}\n"
            + hook.format(n="s", a='"argocd.argoproj.io/hook": Skip')
            + "{{- end }}\n",
        },
        "tests: {enabled: true}\nmigrate: {enabled: true}\nargoHook: true\nskipped: true\n",
    )
    outcome = render(chart)
    found = switches(outcome)
    for key in ("tests.enabled", "migrate.enabled", "argoHook"):
        assert found[key].verdict == HOOKS_ONLY, key
    # gitops-engine: a Skip-only hook annotation is no hook; Argo CD keeps the object
    assert found["skipped"].verdict == FINDING and found["skipped"].rendered == ("Pod s",)
    assert renders(outcome) == 1  # four keys in four templates: one render proves them all


def test_a_whole_map_that_repeats_its_own_enabled_key_is_not_reported(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "app",
        {
            "sm.yaml": "{{- with .Values.serviceMonitor }}\n{{- if .enabled }}\n"
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sm\n{{- end }}\n{{- end }}\n"
        },
        "serviceMonitor:\n  enabled: true\n  interval: 30s\n",
    )
    found = switches(render(chart))
    assert found["serviceMonitor.enabled"].verdict == FINDING
    assert (
        found["serviceMonitor"].verdict == REPEATS and found["serviceMonitor"].why == "serviceMonitor.enabled"
    )


def test_a_flip_that_breaks_the_render_is_not_proven_and_says_why(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "app",
        {
            "d.yaml": "{{- if .Values.enabled }}\n" + DEPLOY + "{{- end }}\n",
            "s.yaml": "{{- if .Values.tls }}\napiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\n"
            '{{- else }}\n{{ fail "tls is required" }}\n{{- end }}\n',
        },
        "enabled: true\ntls: true\n",
    )
    outcome = render(chart)
    found = switches(outcome)
    assert found["enabled"].verdict == FINDING  # split out of the failing render and proven alone
    assert found["tls"].verdict == NOT_PROVEN and "tls is required" in found["tls"].why
    assert renders(outcome) == 3  # both together fail; then each alone


def test_many_keys_in_separate_templates_share_one_render_and_a_warm_cache_adds_none(
    tmp_path: Path,
) -> None:
    templates = {
        f"t{i}.yaml": f"{{{{- if .Values.s{i}.enabled }}}}\napiVersion: v1\nkind: ConfigMap\n"
        f"metadata:\n  name: c{i}\n{{{{- end }}}}\n"
        for i in range(12)
    }
    chart = make_chart(tmp_path / "app", templates, "".join(f"s{i}:\n  enabled: true\n" for i in range(12)))
    cold = render(chart)
    assert renders(cold) == 1 and len([f for f in switches(cold).values() if f.is_finding]) == 12
    warm = render(chart)
    assert renders(warm) == 0 and switches(warm) == switches(cold)
    (chart / "templates" / "t0.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c0\n")
    changed = render(chart)  # new chart content: proven again
    assert renders(changed) == 1 and "s0.enabled" not in switches(changed)


def test_keys_sharing_a_template_are_split_until_each_is_proven(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "app",
        {
            "all.yaml": "".join(
                f"---\n{{{{- if .Values.k{i} }}}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n{{{{- end }}}}\n"
                for i in range(4)
            )
        },
        "".join(f"k{i}: true\n" for i in range(4)),
    )
    outcome = render(chart)
    found = switches(outcome)
    assert {k: f.rendered for k, f in found.items()} == {f"k{i}": (f"ConfigMap c{i}",) for i in range(4)}
    # keys whose templates are the same could not be told apart in one render: one key per render
    assert renders(outcome) == 4


def test_a_subchart_condition_and_its_templates(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "web",
        {"d.yaml": "{{- if .Values.web.enabled }}\n" + DEPLOY + "{{- end }}\n"},
        "web:\n  enabled: true\nredis:\n  enabled: true\n",
    )
    (chart / "Chart.yaml").write_text(
        "apiVersion: v2\nname: web\nversion: 0.1.0\ndependencies:\n"
        "  - name: redis\n    version: 0.1.0\n    condition: redis.enabled\n"
    )
    make_chart(
        chart / "charts" / "redis",
        {
            "pvc.yaml": "{{- if .Values.persistence }}\napiVersion: v1\nkind: PersistentVolumeClaim\n"
            "metadata:\n  name: data\n{{- end }}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: redis\n"
        },
        "persistence: {size: 1Gi}\n",
    )
    outcome = render(chart)
    found = switches(outcome)
    assert found["redis.enabled"].verdict == FINDING
    assert found["redis.enabled"].rendered == ("PersistentVolumeClaim data", "Service redis")
    assert found["redis.persistence"].verdict == FINDING and found["redis.persistence"].flip is None
    assert found["redis.persistence"].rendered == ("PersistentVolumeClaim data",)
    assert all(f.verdict != CANDIDATE for f in found.values())  # every proposal was decided
    # the condition takes the whole subchart: it waits for a second render, the inner key is proven
    # in the first beside web.enabled
    assert renders(outcome) == 2


def test_generate_spends_a_bounded_time_and_later_renders_finish_the_proof(tmp_path: Path) -> None:
    """generate (``hot``) stops proving after about one render's time; the cache keeps what is
    settled and each later render of the same content goes on until every key is decided."""
    chart = make_chart(
        tmp_path / "app",
        {
            "all.yaml": "".join(
                f"---\n{{{{- if .Values.k{i} }}}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n{{{{- end }}}}\n"
                for i in range(6)
            )
        },
        "".join(f"k{i}: true\n" for i in range(6)),
    )
    params, explicit = parse_parameters({}, {})
    env = AppEnv(app_name="app", app_namespace="apps", params=params, explicit=explicit)
    runs = []
    for _ in range(8):
        outcome = pipeline.run(
            chart,
            repo_root=tmp_path,
            env=env,
            settings=CmpSettings.from_env(),
            guards=(ImplicitDefaultsGuard(),),
            hot=True,
        )
        assert len([w for w in outcome.warnings if "chart default" in w]) <= 1
        runs.append(outcome)
        if all(f.verdict != PENDING for f in switches(outcome).values()):
            break
    final = switches(runs[-1])
    assert {k: (f.verdict, f.rendered) for k, f in final.items()} == {
        f"k{i}": (FINDING, (f"ConfigMap c{i}",)) for i in range(6)
    }
    assert sum(renders(o) for o in runs) >= 6  # one template: every key needed a render of its own
    again = render(chart)  # the same content, not hot: everything comes from the cache
    assert renders(again) == 0 and switches(again) == final


def test_a_resumed_proof_keeps_its_splits(tmp_path: Path) -> None:
    """A group split in halves (one flip breaks the render) is resumed as split: each hot render
    settles at least one group, so the proof ends however small the time it may spend."""
    templates = {
        f"t{i}.yaml": f"{{{{- if .Values.s{i} }}}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n{{{{- end }}}}\n"
        for i in range(8)
    }
    templates["tls.yaml"] = (
        "{{- if .Values.tls }}\napiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\n"
        '{{- else }}\n{{ fail "tls is required" }}\n{{- end }}\n'
    )
    chart = make_chart(
        tmp_path / "app", templates, "tls: true\n" + "".join(f"s{i}: true\n" for i in range(8))
    )
    params, explicit = parse_parameters({}, {})
    env = AppEnv(app_name="app", app_namespace="apps", params=params, explicit=explicit)
    for _ in range(20):  # the halving tree of 9 keys has fewer than 20 groups
        outcome = pipeline.run(
            chart,
            repo_root=tmp_path,
            env=env,
            settings=CmpSettings.from_env(),
            guards=(ImplicitDefaultsGuard(),),
            hot=True,
        )
        if all(f.verdict != PENDING for f in switches(outcome).values()):
            break
    found = switches(outcome)
    assert all(found[f"s{i}"].verdict == FINDING for i in range(8))
    assert found["tls"].verdict == NOT_PROVEN and "tls is required" in found["tls"].why


def test_every_candidate_is_flipped_in_one_render(tmp_path: Path) -> None:
    """Keys whose templates overlap (both read in one ConfigMap) are still flipped together: each
    removed resource's template is held by one key only, so one render credits both."""
    cm = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n"
        'data:\n  a: "{{ .Values.a.enabled }}"\n  b: "{{ .Values.b.enabled }}"\n'
    )
    chart = make_chart(
        tmp_path / "app",
        {
            "a.yaml": "{{- if .Values.a.enabled }}\n" + DEPLOY + "{{- end }}\n",
            "b.yaml": "{{- if .Values.b.enabled }}\napiVersion: v1\nkind: Service\nmetadata:\n  name: b\n{{- end }}\n",
            "shared.yaml": cm,
        },
        "a:\n  enabled: true\nb:\n  enabled: true\n",
    )
    outcome = render(chart)
    found = switches(outcome)
    assert found["a.enabled"].rendered == ("Deployment web",)
    assert found["b.enabled"].rendered == ("Service b",)
    assert renders(outcome) == 1


def test_a_removal_hidden_by_another_flip_is_not_missed(tmp_path: Path) -> None:
    """``modern`` off prints the same Service from another template: with every key flipped at once
    the Service only moves, so the keys of both templates are rendered again apart."""
    svc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n"
    chart = make_chart(
        tmp_path / "app",
        {
            "svc.yaml": "{{- if and .Values.enabled .Values.modern }}\n" + svc + "{{- end }}\n",
            "legacy.yaml": "{{- if not .Values.modern }}\n" + svc + "{{- end }}\n",
            "cm.yaml": "{{- if .Values.enabled }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n{{- end }}\n",
        },
        "enabled: true\nmodern: true\n",
    )
    outcome = render(chart)
    found = switches(outcome)
    assert found["enabled"].verdict == FINDING
    assert found["enabled"].rendered == ("ConfigMap cm", "Service web")
    # alone, modern off prints the Service from legacy.yaml: Argo CD keeps it, nothing is removed
    assert found["modern"].verdict == REMOVES_NOTHING
    assert renders(outcome) == 3  # both at once (the Service moved), then each key alone


def test_a_flip_that_breaks_the_render_is_set_aside_by_helms_error(tmp_path: Path) -> None:
    """helm names the values path it could not evaluate: that key renders alone, the rest together."""
    templates = {
        f"m{i}.yaml": f"{{{{- with .Values.m{i} }}}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n{{{{- end }}}}\n"
        for i in range(4)
    }
    templates["route.yaml"] = (
        "{{- with .Values.route }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: route\n{{- end }}\n"
    )
    templates["NOTES.txt"] = "{{ if .Values.route.main.enabled }}reach it at the route{{ end }}\n"
    chart = make_chart(
        tmp_path / "app",
        templates,
        "route:\n  main:\n    enabled: true\n" + "".join(f"m{i}:\n  size: 1\n" for i in range(4)),
    )
    outcome = render(chart)
    found = switches(outcome)
    assert all(found[f"m{i}"].rendered == (f"ConfigMap c{i}",) for i in range(4))
    assert found["route"].verdict == NOT_PROVEN and "NOTES.txt" in found["route"].why
    assert renders(outcome) == 3  # all (fails at .Values.route.main), the rest together, route alone


def test_keys_turned_off_render_apart_from_flips_that_may_break_it(tmp_path: Path) -> None:
    """Keys turned on and maps removed are likelier to break a render (``fail`` for want of
    configuration): the keys turned off are proven in a render of their own all the same."""
    templates = {
        f"t{i}.yaml": f"{{{{- if .Values.s{i} }}}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n{{{{- end }}}}\n"
        for i in range(4)
    }
    templates["ext.yaml"] = (
        "{{- if not .Values.external }}\napiVersion: v1\nkind: Service\nmetadata:\n  name: internal\n"
        '{{- else }}\n{{ fail "external needs a host" }}\n{{- end }}\n'
    )
    chart = make_chart(
        tmp_path / "app", templates, "external: false\n" + "".join(f"s{i}: true\n" for i in range(4))
    )
    outcome = render(chart)
    found = switches(outcome)
    assert all(found[f"s{i}"].rendered == (f"ConfigMap c{i}",) for i in range(4))
    assert found["external"].verdict == NOT_PROVEN and "external needs a host" in found["external"].why
    assert renders(outcome) == 2  # the keys turned off together; external alone


def test_subchart_tags_and_imported_defaults_are_proven(tmp_path: Path) -> None:
    chart = make_chart(
        tmp_path / "web",
        {"backup.yaml": "{{- if .Values.fromredis.backup }}\n" + DEPLOY + "{{- end }}\n"},
        "tags:\n  jobs: true\n",
    )
    (chart / "Chart.yaml").write_text(
        "apiVersion: v2\nname: web\nversion: 0.1.0\ndependencies:\n"
        "  - name: redis\n    version: 0.1.0\n"
        "    import-values:\n      - child: exported\n        parent: fromredis\n"
        "  - name: batch\n    version: 0.1.0\n    tags: [jobs]\n"
    )
    make_chart(
        chart / "charts" / "redis",
        {"svc.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: redis\n"},
        "exported:\n  backup: true\n",
    )
    make_chart(
        chart / "charts" / "batch", {"j.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n"}, ""
    )
    found = switches(render(chart))
    assert found["tags.jobs"].verdict == FINDING and found["tags.jobs"].rendered == ("Job j",)
    backup = found["fromredis.backup"]  # its default comes from the subchart through import-values
    assert backup.verdict == FINDING and backup.default is True and backup.rendered == ("Deployment web",)


def test_keys_sharing_a_removed_resources_template_are_rendered_again_apart(tmp_path: Path) -> None:
    """a and b each gate one document of shared.yaml (and a template of their own): flipped together
    both documents go and either key could have removed either, so each is rendered again alone."""
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {}\n"
    chart = make_chart(
        tmp_path / "app",
        {
            "shared.yaml": "{{- if .Values.a }}\n" + cm.format("sa") + "{{- end }}\n---\n"
            "{{- if .Values.b }}\n" + cm.format("sb") + "{{- end }}\n",
            "a.yaml": "{{- if .Values.a }}\n" + cm.format("a") + "{{- end }}\n",
            "b.yaml": "{{- if .Values.b }}\n" + cm.format("b") + "{{- end }}\n",
        },
        "a: true\nb: true\n",
    )
    outcome = render(chart)
    found = switches(outcome)
    assert found["a"].rendered == ("ConfigMap a", "ConfigMap sa")
    assert found["b"].rendered == ("ConfigMap b", "ConfigMap sb")
    assert renders(outcome) == 3  # both at once, then each alone

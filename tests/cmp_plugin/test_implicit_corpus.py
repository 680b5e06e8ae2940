"""implicit-defaults on real charts (tests/data/charts, copied from the development corpus).

Every gate reported on every template reads back to its keys and is quoted exactly as written;
rendered with real helm (default values and the charts' own ci/*.yaml), no finding has an empty or
false default, sits in a subchart that did not render, or is set by the environment, and warn
mode prints at most one line per render.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cmp_plugin import chart_values as cv
from cmp_plugin import pipeline
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.gating import actions, expression_keys
from cmp_plugin.guards.implicit_defaults import NOTE, Finding, ImplicitDefaultsGuard, prepare
from cmp_plugin.settings import CmpSettings

CHARTS = Path(__file__).resolve().parents[1] / "data" / "charts"
NAMES = ("metrics-server", "prometheus")


def cases() -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for name in NAMES:
        out.append((name, None))
        ci = sorted((CHARTS / name / "ci").glob("*.yaml"))
        out += [(name, f"ci/{f.name}") for f in ci[:3]]
    out.append(("prometheus", "ci/09-standalone-deployment-values.yaml"))  # every subchart off
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_reported_gate_reads_back_to_its_keys_as_written(name: str) -> None:
    chart = CHARTS / name
    prep = prepare(chart, [])
    assert prep.scan.templates > 15 and prep.scan.gates
    by_site: dict[tuple[str, int, str], set[str]] = {}
    for g in prep.scan.gates:
        by_site.setdefault((g.file, g.line, g.expr), set()).add(g.key)
    for (file, line, expr), keys in by_site.items():
        gate = next(g for g in prep.scan.gates if (g.file, g.line, g.expr) == (file, line, expr))
        assert set(expression_keys(expr, dot=gate.dot, variables=gate.variables, scope=gate.scope)) == keys
        text = (chart / file).read_text()
        start = sum(len(x) for x in text.splitlines(keepends=True)[: line - 1])
        body = next(b for s, _, b in actions(text) if s >= start and b is not None)
        assert re.sub(r"\s+", " ", body).strip() == f"{gate.keyword} {expr}", (file, line)
        assert "{{" not in expr and "}}" not in expr.replace('"}}"', "")


def render(
    name: str, values: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> pipeline.Outcome:
    monkeypatch.setenv("DRIFTGUARD_CMP_CACHE_DIR", str(tmp_path / "cache"))
    overrides = {"values-files": [values]} if values else {}
    params, explicit = parse_parameters({}, overrides)
    env = AppEnv(app_name="corpus", app_namespace="corpus", params=params, explicit=explicit)
    chart = CHARTS / name
    return pipeline.run(
        chart, repo_root=CHARTS, env=env, settings=CmpSettings.from_env(), guards=(ImplicitDefaultsGuard(),)
    )


@pytest.mark.parametrize(("name", "values"), cases())
def test_every_finding_meets_the_definition(
    name: str, values: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome = render(name, values, tmp_path, monkeypatch)
    switches = outcome.notes[NOTE]
    assert isinstance(switches, list)
    found: list[Finding] = [f for f in switches if f.is_finding]
    supplied = [cv.load_values((CHARTS / name / values).read_text(), values)] if values else []
    rendered_charts = {d.source.split("/templates/", 1)[0] for d in outcome.docs}
    rendered = {f"{d.kind} {d.name}" for d in outcome.docs}
    for f in found:
        assert cv.truthy(f.default), f.describe()
        assert not any(cv.lookup(doc, f.gate.key)[0] for doc in supplied), f.describe()
        assert f.rendered and set(f.rendered) <= rendered, f.describe()
        if f.gate.file.startswith("charts/"):  # the subchart it sits in did render
            assert f"{name}/" + f.gate.file.split("/templates/", 1)[0] in rendered_charts, f.describe()
    lines = [w for w in outcome.warnings if "chart default" in w]
    assert len(lines) == (1 if found else 0)
    if found:
        assert lines[0].startswith(
            f"driftguard: note: {len({f.gate.key for f in found})} resource switches rely"
        )


def test_disabled_subcharts_hold_no_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = render("prometheus", "ci/09-standalone-deployment-values.yaml", tmp_path, monkeypatch)
    switches = outcome.notes[NOTE]
    assert isinstance(switches, list)
    in_subcharts = [f for f in switches if f.gate.file.startswith("charts/")]
    assert in_subcharts and all(f.verdict == "in a subchart that does not render" for f in in_subcharts)
    assert {f.why for f in in_subcharts} >= {"alertmanager.enabled", "kube-state-metrics.enabled"}
    default = render("prometheus", None, tmp_path, monkeypatch).notes[NOTE]
    assert isinstance(default, list)
    conditions = {f.gate.key: f.verdict for f in default if f.gate.keyword == "condition"}
    assert conditions["alertmanager.enabled"] == "finding"  # on by default, and it renders

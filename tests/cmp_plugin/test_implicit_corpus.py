"""implicit-defaults on real charts (tests/data/charts, copied from the development corpus).

Every gate reported on every template reads back to its keys and is quoted exactly as written;
rendered with real helm (default values and the charts' own ci/*.yaml), every reported key is
proven again by bare helm: flipped alone, it removes exactly the kept resources reported (read
with PyYAML, hooks left out by Argo CD's rule), it is not set by the environment, and warn mode
prints at most one line per render.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from cmp_plugin import pipeline
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.guards.implicit_defaults import ImplicitDefaultsGuard
from cmp_plugin.helmchart import chart_values as cv
from cmp_plugin.helmchart.implicit import NOTE, Finding, by_key, prepare
from cmp_plugin.helmchart.template_lexer import actions, expression_keys
from cmp_plugin.kept import is_kept
from cmp_plugin.settings import CmpSettings

CHARTS = Path(__file__).resolve().parents[1] / "data" / "charts"
HELM = os.environ.get("DRIFTGUARD_HELM", "helm")
NAMES = ("metrics-server", "prometheus")


def cases() -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for name in NAMES:
        out.append((name, None))
        ci = sorted((CHARTS / name / "ci").glob("*.yaml"))
        out += [(name, f"ci/{f.name}") for f in ci[:3]]
    out.append(("prometheus", "ci/09-standalone-deployment-values.yaml"))  # every subchart off
    out.append(("istio-base", None))  # defaults under _internal_defaults_do_not_set
    out.append(("argo-cd", None))  # 21 keys proven on a 59-document chart with a subchart
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


def bare_helm(chart: Path, values: list[Path]) -> dict[tuple[str, str], bool]:
    """(kind, name) -> kept by Argo CD, from bare ``helm template`` read with PyYAML (not our scanner)."""
    argv = [HELM, "template", str(chart), "--name-template", "corpus", "--namespace", "corpus"]
    for v in values:
        argv += ["--values", str(v)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    objs: dict[tuple[str, str], bool] = {}
    for obj in yaml.safe_load_all(out):
        if isinstance(obj, dict) and obj.get("kind"):
            meta = obj.get("metadata") or {}
            objs[(obj["kind"], meta.get("name"))] = is_kept(meta.get("annotations"))
    return objs


def flip_file(tmp_path: Path, key: str, value: object) -> Path:
    doc: dict[str, object] = {}
    node = doc
    parts = key.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})  # type: ignore[assignment]
    node[parts[-1]] = value
    path = tmp_path / f"flip-{key}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow  # minutes: every case renders its whole proof, then bare helm once per finding
@pytest.mark.parametrize(("name", "values"), cases())
def test_every_finding_is_proven_by_bare_helm(
    name: str, values: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reported key, flipped alone with bare helm, removes exactly the kept resources reported."""
    outcome = render(name, values, tmp_path, monkeypatch)
    switches = outcome.notes[NOTE]
    assert isinstance(switches, list)
    found: list[Finding] = [f for f in switches if f.is_finding]
    supplied = [cv.load_values((CHARTS / name / values).read_text(), values)] if values else []
    chart = CHARTS / name
    given = [chart / values] if values else []
    base = bare_helm(chart, given)
    for key, fs in by_key(found).items():
        f = fs[0]
        assert not any(cv.lookup(doc, key)[0] for doc in supplied), f.describe()
        assert f.rendered and all(f.rendered == g.rendered for g in fs), f.describe()
        flipped = bare_helm(chart, [*given, flip_file(tmp_path, key, f.flip)])
        gone = sorted(f"{k} {n}" for (k, n), kept in base.items() if kept and (k, n) not in flipped)
        assert tuple(gone) == f.rendered, f.describe()
    lines = [w for w in outcome.warnings if "chart default" in w]
    assert len(lines) == (1 if found else 0)
    if found:
        assert lines[0].startswith(f"driftguard: note: {len(by_key(found))} resource switches rely")


@pytest.mark.slow  # real charts, proven by bare helm
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

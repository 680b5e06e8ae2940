"""The cause of a removal: the shrink guard and the PR diff name the key a render proves, or say they
do not know. The case from real charts: two gates hide a Secret each; the old rule blamed the first
hidden gate of the same kind (internalTLS) for the Secret that trivy.enabled decided."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from cmp_plugin import pipeline
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.prcheck.envcause import probe, removal_causes
from cmp_plugin.renderers.base import RenderJob
from cmp_plugin.settings import CmpSettings
from driftguard.cause import CHART_DEFAULT, parse_condition
from driftguard.manifests import ResourceKey
from tests.helpers import run_cmp

from .conftest import cmp_env

SECRET = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {}\n"


def harbor(root: Path, *, trivy: bool) -> Path:
    chart = root / "harbor"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: harbor\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text(
        f"internalTLS:\n  enabled: false\ntrivy:\n  enabled: {str(trivy).lower()}\n"
    )
    (chart / "templates" / "internal-tls.yaml").write_text(
        "{{- if .Values.internalTLS.enabled }}\n" + SECRET.format("harbor-internal-tls") + "{{- end }}\n"
    )
    (chart / "templates" / "trivy.yaml").write_text(
        "{{- if .Values.trivy.enabled }}\n" + SECRET.format("harbor-trivy") + "{{- end }}\n"
    )
    (chart / "templates" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: core\n")
    return chart


def generate(chart: Path, cache: Path, *params: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {
        "DRIFTGUARD_CMP_CACHE_DIR": str(cache),
        **cmp_env("harbor", list(params), ARGOCD_APP_NAME="harbor"),
    }
    return run_cmp(chart, env, "generate")


def test_the_shrink_guard_names_the_key_a_render_proves(tmp_path: Path) -> None:
    chart = harbor(tmp_path / "repo", trivy=True)
    cache = tmp_path / "cache"
    assert generate(chart, cache).returncode == 0  # the last good render: the baseline
    (chart / "values.yaml").write_text("internalTLS:\n  enabled: false\ntrivy:\n  enabled: false\n")
    proc = generate(chart, cache, {"name": "max-prune-count", "string": "0"})
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    assert (
        "  Secret apps/harbor-trivy  <- hidden by the chart default of trivy.enabled (templates/trivy.yaml:1)"
        in lines
    )
    assert "internalTLS" not in proc.stderr
    cause = parse_condition(proc.stderr)
    assert cause is not None and [(k.key, k.origin, k.where) for k in cause.keys] == [
        ("trivy.enabled", CHART_DEFAULT, "templates/trivy.yaml:1")
    ]


def test_the_shrink_guard_says_when_it_does_not_know(tmp_path: Path) -> None:
    chart = harbor(tmp_path / "repo", trivy=True)
    cache = tmp_path / "cache"
    assert generate(chart, cache).returncode == 0
    (chart / "templates" / "cm.yaml").unlink()  # gone with its template: no key decides it
    proc = generate(chart, cache, {"name": "max-prune-count", "string": "0"})
    assert proc.returncode == 3
    assert "  ConfigMap apps/core  <- which values key decided it: not known" in proc.stderr.splitlines()
    assert "gating key" not in proc.stderr


def rendered(chart: Path, scratch: Path):  # type: ignore[no-untyped-def]
    params, explicit = parse_parameters({}, {})
    env = AppEnv(app_name="harbor", app_namespace="apps", params=params, explicit=explicit)
    settings = CmpSettings.from_env()
    outcome = pipeline.run(chart, repo_root=chart.parent, env=env, settings=settings, guards=())
    scratch.mkdir(parents=True, exist_ok=True)
    return probe(
        RenderJob(chart.resolve(), chart.parent.resolve(), env, settings, scratch), outcome.text, outcome.docs
    )


def test_the_pr_diff_uses_the_same_proof(tmp_path: Path) -> None:
    base = rendered(harbor(tmp_path / "base", trivy=True), tmp_path / "s1")
    head_chart = harbor(tmp_path / "head", trivy=False)
    (head_chart / "templates" / "cm.yaml").unlink()
    head = rendered(head_chart, tmp_path / "s2")
    trivy = ResourceKey("", "Secret", "apps", "harbor-trivy")
    core = ResourceKey("", "ConfigMap", "apps", "core")
    why = removal_causes(base, head, [trivy, core])
    assert why == {
        trivy: "the chart default of `trivy.enabled` changed from true to false and this environment does "
        "not set it (templates/trivy.yaml:1: {{ if .Values.trivy.enabled }})"
    }  # the ConfigMap's template is gone: no key brings it back, so none is named


def test_copies_do_not_share_a_proof_cache_entry(tmp_path: Path) -> None:
    """The proof cache is keyed by content: two charts that differ in one default are proven apart."""
    one = rendered(harbor(tmp_path / "a", trivy=True), tmp_path / "s1")
    shutil.copytree(tmp_path / "a" / "harbor", tmp_path / "b" / "harbor")
    (tmp_path / "b" / "harbor" / "values.yaml").write_text(
        "internalTLS:\n  enabled: true\ntrivy:\n  enabled: false\n"
    )
    two = rendered(tmp_path / "b" / "harbor", tmp_path / "s2")
    trivy = ResourceKey("", "Secret", "apps", "harbor-trivy")
    assert trivy in removal_causes(one, two, [trivy])


def test_keys_sharing_a_template_are_told_apart_by_their_own_renders(tmp_path: Path) -> None:
    """Every hidden gate is flipped on in one render: both Secrets come back from the one template
    the two keys share, so each key is rendered again alone and only the one that brings the
    missing Secret back is named."""
    chart = tmp_path / "repo" / "harbor"  # the path cmp_env gives Argo CD's source path
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: harbor\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("a: false\nb: true\n")
    (chart / "templates" / "secrets.yaml").write_text(
        "{{- if .Values.a }}\n" + SECRET.format("sa") + "{{- end }}\n"
        "---\n{{- if .Values.b }}\n" + SECRET.format("sb") + "{{- end }}\n"
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: core\n"
    )
    for key in ("a", "b"):  # a template of its own each: the two keys are flipped in one render
        (chart / "templates" / f"{key}.yaml").write_text(
            f"{{{{- if .Values.{key} }}}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {key}\n{{{{- end }}}}\n"
        )
    cache = tmp_path / "cache"
    assert generate(chart, cache).returncode == 0  # the last good render: the baseline holds sb
    (chart / "values.yaml").write_text("a: false\nb: false\n")
    proc = generate(chart, cache, {"name": "max-prune-count", "string": "0"})
    assert proc.returncode == 3, proc.stderr
    # (a cause names its key's first gate; a, first in the scan, would be named if it were credited)
    assert "  Secret apps/sb  <- hidden by the chart default of b (templates/b.yaml:1)" in (
        proc.stderr.splitlines()
    ), proc.stderr
    assert "  ConfigMap apps/b  <- hidden by the chart default of b (templates/b.yaml:1)" in proc.stderr
    assert " of a " not in proc.stderr

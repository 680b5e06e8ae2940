"""Issue 27: kustomize's Helm inflation (platform's DRIFTGUARD_KUSTOMIZE_ENABLE_HELM=true) confined.

kustomize builds helm's argv from the tenant's ``helmCharts`` fields (cmp_plugin/helm_inflation.py
cites where): before, ``releaseName: --post-renderer=/bin/sh`` had helm pipe the tenant's chart
into a shell, ``nameTemplate`` printed the sidecar's environment, ``name: ../..`` rendered a chart
outside the checkout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Generate

HELM_ON = {"DRIFTGUARD_KUSTOMIZE_ENABLE_HELM": "true"}
SECRET = "http://user:s3cret-proxy-password@proxy.example.com:3128"


def chart(at: Path, *, marker: Path | None = None) -> None:
    (at / "templates").mkdir(parents=True)
    (at / "Chart.yaml").write_text(f"apiVersion: v2\nname: {at.name}\nversion: 1.0.0\n")
    (at / "values.yaml").write_text("{}\n")
    touch = f"$(touch {marker})" if marker else "plain"
    (at / "templates" / "cm.yaml").write_text(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-{at.name}\ndata:\n  x: {touch}\n"
    )


def app(repo: Path, helm_chart: str) -> Path:
    base = repo / "overlays" / "inflate"
    base.mkdir(parents=True)
    (base / "kustomization.yaml").write_text(f"helmCharts:\n- {helm_chart}\n")
    return base


def test_a_chart_inside_renders(generate: Generate, repo: Path) -> None:
    """The control: a plain helmCharts entry renders with the platform's switch on."""
    base = app(repo, "{name: c, releaseName: web, namespace: apps, version: 1.0.0}")
    chart(base / "charts" / "c")
    proc = generate("overlays/inflate", **HELM_ON)
    assert proc.returncode == 0, proc.stderr
    assert "name: from-c" in proc.stdout


def test_a_release_name_that_is_a_flag_runs_nothing(generate: Generate, repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    base = app(repo, "{name: c, releaseName: --post-renderer=/bin/sh}")
    chart(base / "charts" / "c", marker=marker)
    proc = generate("overlays/inflate", **HELM_ON)
    assert proc.returncode != 0
    assert "releaseName" in proc.stderr and "refused" in proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("{name: c, nameTemplate: '{{ env \"HTTPS_PROXY\" }}'}", "nameTemplate"),
        ("{name: c, NameTemplate: '{{ env \"HTTPS_PROXY\" }}'}", "nameTemplate"),
        ("{name: c, namespace: --post-renderer=/bin/sh}", "namespace"),
        ("{name: '--post-renderer=/bin/sh'}", "name"),
        ("{name: ../../../outside}", "name"),
        ("{name: c, version: --devel}", "version"),
        ("{name: c, repo: 'file:///etc'}", "repo"),
        ("{name: c, kubeVersion: --post-renderer=x}", "kubeVersion"),
    ],
)
def test_each_chart_field_is_checked(generate: Generate, repo: Path, entry: str, field: str) -> None:
    base = app(repo, entry)
    chart(base / "charts" / "c")
    chart(repo.parent / "outside")
    proc = generate("overlays/inflate", HTTPS_PROXY=SECRET, **HELM_ON)
    assert proc.returncode != 0, proc.stdout
    assert field in proc.stderr or "outside the repository checkout" in proc.stderr, proc.stderr
    assert "s3cret" not in proc.stderr + proc.stdout
    assert "from-outside" not in proc.stdout


def test_a_generator_config_is_checked_too(generate: Generate, repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    base = repo / "overlays" / "inflate"
    chart(base / "charts" / "c", marker=marker)
    (base / "kustomization.yaml").write_text("generators: [gen.yaml]\n")
    (base / "gen.yaml").write_text(
        "apiVersion: builtin\nkind: HelmChartInflationGenerator\nmetadata: {name: g}\n"
        "name: c\nReleaseName: --post-renderer=/bin/sh\n"
    )
    proc = generate("overlays/inflate", **HELM_ON)
    assert proc.returncode != 0
    assert not marker.exists()

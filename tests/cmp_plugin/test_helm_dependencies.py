"""Chart dependencies as helm loads them, and helm's own error when they cannot be had."""

from __future__ import annotations

import shutil
from pathlib import Path

from .conftest import Generate, cmp_env
from .test_parity import HELM, bare


def _bare_template(chart: Path) -> list[str]:
    env = cmp_env("x")
    argv = [HELM, "template", ".", "--name-template", chart.name, "--namespace", "apps"]
    argv += ["--kube-version", env["KUBE_VERSION"]]
    for api in env["KUBE_API_VERSIONS"].split(","):
        argv += ["--api-versions", api]
    return [*argv, "--include-crds"]


def test_a_vendored_subchart_under_another_folder_name_is_no_missing_dependency(
    generate: Generate, repo: Path
) -> None:
    # helm matches a dependency by the name in the subchart's Chart.yaml, not by the folder name
    web = repo / "charts/web"
    (web / "charts/redis").rename(web / "charts/redis-7.0.0")
    shutil.copytree(repo / "charts/common", web / "charts/common-unpacked")
    chart = (web / "Chart.yaml").read_text().replace("    repository: file://../common\n", "")
    (web / "Chart.yaml").write_text(chart)
    proc = generate("charts/web")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == bare(_bare_template(web), web)
    assert not list((web / "charts").glob("*.tgz"))  # nothing was built (no network needed)


def test_unreachable_repositories_are_named(generate: Generate, repo: Path) -> None:
    # Argo CD adds the repository first (`helm repo add`) and fails there, naming it
    web = repo / "charts/web"
    (web / "Chart.yaml").write_text(
        (web / "Chart.yaml").read_text()
        + "  - name: absent\n    version: 1.0.0\n    repository: https://charts.invalid.example.com\n"
    )
    proc = generate("charts/web")
    assert proc.returncode == 2
    head = proc.stderr.splitlines()[0]
    assert head.startswith(
        "driftguard: error: the chart repository https://charts.invalid.example.com of the chart's "
        "dependencies could not be fetched"
    )
    assert "failed to update the following repositories: [https://charts.invalid.example.com]" in proc.stderr
    assert "found in Chart.yaml, but missing in charts/ directory: common, absent" in proc.stderr


def test_a_dependency_that_cannot_be_built_shows_helms_own_error(generate: Generate, repo: Path) -> None:
    web = repo / "charts/web"
    (web / "Chart.yaml").write_text(
        (web / "Chart.yaml").read_text()
        + "  - name: absent\n    version: 1.0.0\n    repository: file://../absent\n"
    )
    proc = generate("charts/web")
    assert proc.returncode == 2
    head = proc.stderr.splitlines()[0]
    assert head.startswith("driftguard: error: chart dependencies common, absent are not in charts/")
    # what Argo CD would show: helm template's complaint, then the failed build
    assert "found in Chart.yaml, but missing in charts/ directory: common, absent" in proc.stderr
    assert "helm dependency build:" in proc.stderr

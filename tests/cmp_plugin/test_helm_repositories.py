"""Charts whose dependencies come from chart repositories and OCI registries render, as in Argo CD.

Argo CD adds every repository a chart's dependencies name before ``helm dependency build``
(util/helm/helm.go ``DependencyBuild``; reposerver/repository/repository.go
``getHelmDependencyRepos``), in a helm home of its own. The stand-ins are real protocol: a chart
repository (index.yaml and packaged charts made by the real helm, served on loopback:
standins/chart_repo.py) and an OCI registry the real ``helm push`` uploads to
(standins/oci_registry.py).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from standins.chart_repo import ChartRepo, serve_chart_repo
from standins.oci_registry import Registry, serve_registry

from .conftest import Generate

HELM = os.environ["DRIFTGUARD_HELM"]
PASSWORD = "s3cret-planted-password"


def _helm(*args: str, home: Path) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    proc = subprocess.run([HELM, *args], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _library(root: Path, name: str, version: str) -> Path:
    chart = root / name
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: {version}\n")
    (chart / "templates" / "cm.yaml").write_text(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ .Release.Name }}}}-{name}\n"
    )
    return chart


@pytest.fixture
def charts(tmp_path: Path) -> Path:
    """Packaged charts made by the real helm: redis-1.2.3.tgz and postgres-2.0.0.tgz."""
    out = tmp_path / "packaged"
    out.mkdir()
    for name, version in (("redis", "1.2.3"), ("postgres", "2.0.0")):
        _helm("package", str(_library(tmp_path / "src", name, version)), "-d", str(out), home=tmp_path / "h")
    return out


@pytest.fixture
def chart_repo(charts: Path, tmp_path: Path) -> Iterator[ChartRepo]:
    with serve_chart_repo(charts) as repo:
        _helm("repo", "index", str(charts), "--url", repo.url, home=tmp_path / "h")
        yield repo


@pytest.fixture
def private_repo(charts: Path, tmp_path: Path) -> Iterator[ChartRepo]:
    private = tmp_path / "private"
    private.mkdir()
    (private / "redis-1.2.3.tgz").write_bytes((charts / "redis-1.2.3.tgz").read_bytes())
    with serve_chart_repo(private, username="reader", password=PASSWORD) as repo:
        _helm("repo", "index", str(private), "--url", repo.url, home=tmp_path / "h")
        yield repo


@pytest.fixture
def registry(charts: Path, tmp_path: Path) -> Iterator[Registry]:
    with serve_registry() as reg:
        _helm(
            "push",
            str(charts / "postgres-2.0.0.tgz"),
            f"oci://{reg.host}/charts",
            "--plain-http",
            home=tmp_path / "h",
        )
        yield reg


def _app(repo: Path, deps: list[dict[str, str]]) -> str:
    app = repo / "charts" / "withdeps"
    (app / "templates").mkdir(parents=True)
    lines = ["apiVersion: v2", "name: withdeps", "version: 0.1.0", "dependencies:"]
    for dep in deps:
        lines += [
            f"  - name: {dep['name']}",
            f"    version: {dep['version']}",
            f"    repository: {json.dumps(dep['repository'])}",
        ]
    (app / "Chart.yaml").write_text("\n".join(lines) + "\n")
    (app / "templates" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: own\n")
    return "charts/withdeps"


def _names(stdout: str) -> set[str]:
    return {line.split(":", 1)[1].strip() for line in stdout.splitlines() if line.startswith("  name:")}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    scratch = tmp_path / "sidecar-tmp"
    scratch.mkdir(exist_ok=True)
    return {"TMPDIR": str(scratch), **extra}


def test_chart_repository_and_oci_dependencies_render(
    generate: Generate, repo: Path, tmp_path: Path, chart_repo: ChartRepo, registry: Registry
) -> None:
    app = _app(
        repo,
        [
            {"name": "redis", "version": "1.2.3", "repository": chart_repo.url},
            {"name": "postgres", "version": "2.0.0", "repository": f"oci://{registry.host}/charts"},
        ],
    )
    env = _env(tmp_path, DRIFTGUARD_CMP_HELM_PLAIN_HTTP_REGISTRIES=registry.host)
    proc = generate(app, **env)
    assert proc.returncode == 0, proc.stderr
    assert _names(proc.stdout) == {"own", "withdeps-redis", "withdeps-postgres"}
    # the repository was added (its index fetched) before the build, and the chart came from it
    assert [p for p, _ in chart_repo.requests] == ["/index.yaml", "/redis-1.2.3.tgz"]
    assert ("GET", "/v2/charts/postgres/manifests/2.0.0", "") in registry.requests or any(
        m == "GET" and "/v2/charts/postgres/manifests/" in p for m, p, _ in registry.requests
    )
    # the helm home was the render's own: nothing of it is left in the sidecar's temporary directory
    assert list((tmp_path / "sidecar-tmp").iterdir()) == []


def test_credentials_come_from_the_file_the_platform_mounts(
    generate: Generate, repo: Path, tmp_path: Path, private_repo: ChartRepo
) -> None:
    app = _app(repo, [{"name": "redis", "version": "1.2.3", "repository": private_repo.url + "/"}])
    denied = generate(app, **_env(tmp_path))
    assert denied.returncode == 2
    assert denied.stderr.splitlines()[0] == (
        f"driftguard: error: the chart repository {private_repo.url}/ of the chart's dependencies could not "
        "be fetched (helm repo update); check the URL, and for a private repository its credentials in "
        "DRIFTGUARD_CMP_HELM_REPOSITORIES; chart dependencies redis are not in charts/"
    )
    # what helm itself says, as Argo CD would show it: the template's complaint
    assert "found in Chart.yaml, but missing in charts/ directory: redis" in denied.stderr
    assert f"failed to update the following repositories: [{private_repo.url}/]" in denied.stderr
    mounted = tmp_path / "secret" / "repositories.yaml"
    mounted.parent.mkdir()
    mounted.write_text(
        "apiVersion: ''\nrepositories:\n"
        f"  - name: private\n    url: {private_repo.url}\n    username: reader\n    password: {PASSWORD}\n"
    )
    private_repo.requests.clear()
    proc = generate(
        app, ARGOCD_APP_NAME="argocd_creds", **_env(tmp_path, DRIFTGUARD_CMP_HELM_REPOSITORIES=str(mounted))
    )
    assert proc.returncode == 0, proc.stderr
    assert "creds-redis" in _names(proc.stdout)
    assert {user for _, user in private_repo.requests} == {"reader"}
    assert PASSWORD not in proc.stderr + denied.stderr


def test_a_named_repository_resolves_through_the_platforms_file(
    generate: Generate, repo: Path, tmp_path: Path, chart_repo: ChartRepo
) -> None:
    mounted = tmp_path / "repositories.yaml"
    mounted.write_text(f"repositories:\n  - name: platform-charts\n    url: {chart_repo.url}\n")
    app = _app(repo, [{"name": "redis", "version": "1.2.3", "repository": "@platform-charts"}])
    proc = generate(app, **_env(tmp_path, DRIFTGUARD_CMP_HELM_REPOSITORIES=str(mounted)))
    assert proc.returncode == 0, proc.stderr
    assert "withdeps-redis" in _names(proc.stdout)
    (repo / app / "charts").exists() and [p.unlink() for p in (repo / app / "charts").iterdir()]
    (repo / app / "Chart.yaml").write_text(
        (repo / app / "Chart.yaml").read_text().replace("@platform-charts", "alias:elsewhere")
    )
    proc = generate(
        app, ARGOCD_APP_NAME="argocd_other", **_env(tmp_path, DRIFTGUARD_CMP_HELM_REPOSITORIES=str(mounted))
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        "driftguard: error: chart dependency redis refers to the repository 'alias:elsewhere', which the "
        "platform does not define (DRIFTGUARD_CMP_HELM_REPOSITORIES); use the repository's URL, or vendor "
        "the chart into charts/"
    )


def test_vendored_only_refuses_naming_the_dependency_and_fetches_nothing(
    generate: Generate, repo: Path, tmp_path: Path, chart_repo: ChartRepo, registry: Registry, charts: Path
) -> None:
    app = _app(
        repo,
        [
            {"name": "redis", "version": "1.2.3", "repository": chart_repo.url},
            {"name": "postgres", "version": "2.0.0", "repository": f"oci://{registry.host}/charts"},
        ],
    )
    pushed = len(registry.requests)
    proc = generate(app, **_env(tmp_path, DRIFTGUARD_CMP_HELM_VENDORED_ONLY="true"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        f"driftguard: error: chart dependencies redis ({chart_repo.url}), postgres (oci://{registry.host}/charts) "
        "are not vendored in charts/, and the platform allows vendored dependencies only "
        "(DRIFTGUARD_CMP_HELM_VENDORED_ONLY); run `helm dependency build` and commit charts/"
    )
    assert chart_repo.requests == [] and len(registry.requests) == pushed
    # vendored, the same chart renders under the switch
    (repo / app / "charts").mkdir()
    for name in ("redis-1.2.3.tgz", "postgres-2.0.0.tgz"):
        (repo / app / "charts" / name).write_bytes((charts / name).read_bytes())
    proc = generate(app, **_env(tmp_path, DRIFTGUARD_CMP_HELM_VENDORED_ONLY="true"))
    assert proc.returncode == 0, proc.stderr
    assert _names(proc.stdout) == {"own", "withdeps-redis", "withdeps-postgres"}


def test_oci_credentials_come_from_the_mounted_registry_config(
    generate: Generate, repo: Path, tmp_path: Path, charts: Path
) -> None:
    with serve_registry(username="puller", password=PASSWORD) as reg:
        config: dict[str, Any] = {
            "auths": {reg.host: {"auth": base64.b64encode(f"puller:{PASSWORD}".encode()).decode()}}
        }
        mounted = tmp_path / "registry" / "config.json"
        mounted.parent.mkdir()
        mounted.write_text(json.dumps(config))
        home = tmp_path / "pusher"
        _helm("registry", "login", reg.host, "--plain-http", "-u", "puller", "-p", PASSWORD, home=home)
        _helm(
            "push", str(charts / "postgres-2.0.0.tgz"), f"oci://{reg.host}/charts", "--plain-http", home=home
        )
        app = _app(repo, [{"name": "postgres", "version": "2.0.0", "repository": f"oci://{reg.host}/charts"}])
        plain = {"DRIFTGUARD_CMP_HELM_PLAIN_HTTP_REGISTRIES": reg.host}
        denied = generate(app, **_env(tmp_path, **plain))
        assert denied.returncode == 2, denied.stderr
        proc = generate(
            app,
            ARGOCD_APP_NAME="argocd_oci",
            **_env(tmp_path, DRIFTGUARD_CMP_HELM_REGISTRY_CONFIG=str(mounted), **plain),
        )
        assert proc.returncode == 0, proc.stderr
        assert "oci-postgres" in _names(proc.stdout)
        assert PASSWORD not in proc.stderr + denied.stderr
        assert json.loads(mounted.read_text()) == config  # read, never written


def test_relative_credential_paths_are_a_configuration_error(
    generate: Generate, repo: Path, tmp_path: Path
) -> None:
    proc = generate("charts/web", DRIFTGUARD_CMP_HELM_REPOSITORIES="secret/repositories.yaml")
    assert proc.returncode == 2
    assert "DRIFTGUARD_CMP_HELM_REPOSITORIES" in proc.stderr and "absolute path" in proc.stderr


def test_a_platform_url_with_credentials_is_never_shown(
    generate: Generate, repo: Path, tmp_path: Path
) -> None:
    mounted = tmp_path / "repositories.yaml"
    mounted.write_text(
        f"repositories:\n  - name: inhouse\n    url: http://reader:{PASSWORD}@127.0.0.1:9/charts\n"
    )
    app = _app(repo, [{"name": "redis", "version": "1.2.3", "repository": "@inhouse"}])
    proc = generate(app, **_env(tmp_path, DRIFTGUARD_CMP_HELM_REPOSITORIES=str(mounted)))
    assert proc.returncode == 2
    assert "the chart repository http://***@127.0.0.1:9/charts of the chart's dependencies" in proc.stderr
    assert PASSWORD not in proc.stderr

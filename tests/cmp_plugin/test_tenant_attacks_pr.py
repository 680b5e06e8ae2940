"""A hostile tenant's repository against the PR check and the helm argv (attacks after issue 14).

Each attack is built here as a git repository (symlinks committed as git stores them) or a chart,
run with the real helm, the plugin run as the CI job or argocd-cmp-server runs it. None of them may
print what a file outside the checkout, or the plugin's environment, holds.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .conftest import run_cmp
from .gitrepo import REPO_URL, Repo, appset, configmaps

SECRET = "s3cr3t-outside-the-checkout-7f1d"
PROXY = f"http://ci:{SECRET}@proxy.example.com:3128"


def _diff(repo: Repo, base: str, head: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_HELM": os.environ["DRIFTGUARD_HELM"],
        "DRIFTGUARD_KUSTOMIZE": os.environ["DRIFTGUARD_KUSTOMIZE"],
        "HOME": str(repo.path.parent),
        **extra,
    }
    return run_cmp(repo.path, env, "diff", "--base", base, "--head", head, *args)


def _no_leak(proc: subprocess.CompletedProcess[str]) -> str:
    out = proc.stdout + proc.stderr
    assert SECRET not in out, out[-3000:]
    return out


# --- the git files generator follows no symlink out of the checkout ---------------------------


def test_a_git_files_generator_does_not_read_through_a_symlink_out_of_the_checkout(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text(f'{{"team": "{SECRET}"}}\n')
    repo = Repo(tmp_path / "gitops")
    repo.write("config/alpha/config.json", '{"team": "alpha"}\n')
    for team in ("alpha", "beta"):
        repo.write(f"teams/{team}/manifests.yaml", configmaps(f"{team}-a"))
    spec = {"git": {"repoURL": REPO_URL, "revision": "HEAD", "files": [{"path": "config/*/config.json"}]}}
    repo.write(
        "apps/teams.yaml", appset("teams", [spec], app_name="team-{{team}}", path="teams/{{path.basename}}")
    )
    base = repo.commit("base")
    (repo.path / "config" / "beta").mkdir()
    (repo.path / "config" / "beta" / "config.json").symlink_to(outside / "config.json")
    head = repo.commit("a symlinked config")
    proc = _diff(repo, base, head, "apps/")
    out = _no_leak(proc)
    assert proc.returncode != 0, out
    assert "config/beta/config.json" in out and "outside the repository" in out, out


# --- the release name is never a template -----------------------------------------------------

CHART = "apiVersion: v2\nname: web\nversion: 1.0.0\n"
CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"
TEMPLATED = '{{ env (printf "HTTPS%cPROXY" 95) }}'  # no "_": the release name drops a "<ns>_" prefix


def _application(name: str, path: str) -> dict[str, object]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": REPO_URL, "path": path, "plugin": {"name": "driftguard"}},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "apps"},
        },
    }


def test_an_application_name_is_not_evaluated_as_helms_name_template(tmp_path: Path) -> None:
    """helm's --name-template is a Go template with sprig's env: the PR's Application name must not reach it."""
    repo = Repo(tmp_path / "gitops")
    repo.write("charts/web/Chart.yaml", CHART)
    repo.write("charts/web/templates/cm.yaml", CM)
    repo.write("apps/web.yaml", _application("web", "charts/web"))
    base = repo.commit("base")
    repo.write("apps/web.yaml", _application(TEMPLATED, "charts/web"))
    head = repo.commit("a templated name")
    proc = _diff(repo, base, head, "apps/", HTTPS_PROXY=PROXY)
    out = _no_leak(proc)
    assert proc.returncode != 0, out
    assert "is not a valid Helm release name" in out, out


def test_a_directory_name_is_not_evaluated_as_helms_name_template(tmp_path: Path) -> None:
    """`driftguard-cmp render <dir>` names the release after the directory, which the tenant names."""
    here = tmp_path / "checkout" / TEMPLATED
    (here / "templates").mkdir(parents=True)
    (tmp_path / "checkout" / ".git").mkdir()
    (here / "Chart.yaml").write_text(CHART)
    (here / "templates" / "cm.yaml").write_text(CM)
    env = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_HELM": os.environ["DRIFTGUARD_HELM"],
        "DRIFTGUARD_KUSTOMIZE": os.environ["DRIFTGUARD_KUSTOMIZE"],
        "HOME": str(tmp_path),
        "HTTPS_PROXY": PROXY,
    }
    proc = run_cmp(here, env, "render", str(here))
    out = _no_leak(proc)
    assert proc.returncode != 0, out
    assert out.startswith("driftguard: error: ") and "not a valid Helm release name" in out, out
    # a name helm accepts still renders, and the release carries it
    ok = run_cmp(here, env, "render", str(here), "--app-name", "web")
    assert ok.returncode == 0, ok.stderr

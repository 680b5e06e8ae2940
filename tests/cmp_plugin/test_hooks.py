"""The repository's pre-commit hooks, run by pre-commit itself on a generated GitOps repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import git

ROOT = Path(__file__).resolve().parents[2]
PRE_COMMIT = Path(sys.executable).parent / "pre-commit"

CHART = {
    "charts/payment/Chart.yaml": "apiVersion: v2\nname: payment\nversion: 1.0.0\n",
    "charts/payment/values.yaml": "enabled: true\n",
    "charts/payment/templates/cm.yaml": (
        "{{- if .Values.enabled }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: payment}\n{{- end }}\n"
    ),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("gitops")
    git(repo, "init", "-q", "-b", "main")
    for name, text in CHART.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    (repo / ".gitignore").write_text("helm-rendered/\nkustomize-build/\n*.local.yaml\n")
    return repo


def local_config(repo: Path) -> None:
    """A .pre-commit-config.yaml whose hooks are this project's .pre-commit-hooks.yaml entries as
    they stand (ids, entries, file filters), run from this venv instead of one pre-commit would
    build by pip-installing the project (minutes on a busy machine; `make setup` installs the same)."""
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    local = [{**h, "language": "system"} for h in hooks]
    (repo / ".pre-commit-config.yaml").write_text(
        yaml.safe_dump({"repos": [{"repo": "local", "hooks": local}]})
    )


def try_repo(repo: Path, hook: str, *files: str) -> subprocess.CompletedProcess[str]:
    """``pre-commit run HOOK`` in ``repo`` with the project's hooks."""
    local_config(repo)
    env = {**os.environ, "PRE_COMMIT_HOME": str(repo.parent / "pre-commit-home")}
    env["PATH"] = os.pathsep.join([str(PRE_COMMIT.parent), env["PATH"]])
    cmd = [str(PRE_COMMIT), "run", hook, "--verbose", "--color", "never"]
    cmd += ["--files", *files] if files else ["--all-files"]
    return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env, check=False, timeout=300)


def test_the_manifest_is_one_pre_commit_accepts() -> None:
    out = subprocess.run(
        [str(PRE_COMMIT), "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    ids = [h["id"] for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())]
    assert ids == ["driftguard-no-render-output", "driftguard-gitignore", "driftguard-render"]
    assert all(
        h["language"] == "python" for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    )


def test_the_three_hooks_under_pre_commit(repo: Path) -> None:
    git(repo, "add", "-A")
    ok = try_repo(repo, "driftguard-render", *CHART)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "charts/payment: helm rendered 1 resource(s); every guard passed" in ok.stdout

    # a template that helm cannot render fails the commit, naming the tool's error
    (repo / "charts/payment/templates/bad.yaml").write_text("{{ .Values.missing.key }}\n")
    git(repo, "add", "-A")
    bad = try_repo(repo, "driftguard-render", "charts/payment/templates/bad.yaml")
    assert bad.returncode == 1 and "nil pointer evaluating interface {}.key" in bad.stdout, bad.stdout
    (repo / "charts/payment/templates/bad.yaml").unlink()

    # committed render output (the incident's first link), force-added past .gitignore
    (repo / "charts/payment/helm-rendered").mkdir()
    (repo / "charts/payment/helm-rendered/all.yaml").write_text("kind: ConfigMap\n")
    git(repo, "add", "-A", "-f")
    stray = try_repo(repo, "driftguard-no-render-output", "charts/payment/helm-rendered/all.yaml")
    assert stray.returncode == 1
    assert "charts/payment/helm-rendered/all.yaml: render output must not be committed" in stray.stdout

    # the .gitignore the rebase reverted
    assert try_repo(repo, "driftguard-gitignore").returncode == 0
    (repo / ".gitignore").write_text("*.local.yaml\n")
    lost = try_repo(repo, "driftguard-gitignore")
    assert lost.returncode == 1
    assert "charts/payment/helm-rendered/deployment.yaml would not be ignored" in lost.stdout
    assert "kustomize-build/all.yaml would not be ignored" in lost.stdout
    assert "values.local.yaml would not be ignored" not in lost.stdout

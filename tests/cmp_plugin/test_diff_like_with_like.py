"""Issue 14, finding 5: the PR diff cannot be walked past.

Each environment is the Application's name; base's definition renders base and head's renders
head, so re-pointing ``source.path`` or changing parameters shows (and blocks) what it removes.
``source.path`` stays inside the repository; the number of Applications and the whole run are
bounded; the git worktrees go away on exit and on SIGINT/SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import start_cmp, wait_until

from .gitrepo import EXAMPLE, REPO_URL, Repo, configmaps


def application(name: str, path: str, params: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    source: dict[str, Any] = {"repoURL": REPO_URL, "targetRevision": "main", "path": path}
    if params is not None:
        source["plugin"] = {"name": "driftguard", "parameters": params}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {"project": "default", "source": source, "destination": {"namespace": name}},
    }


def test_repointing_source_path_shows_every_removal_and_blocks(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "gitops")
    repo.write(
        "big/all.yaml", configmaps(*(f"cm-{i:02d}" for i in range(30)), namespace="payment-production")
    )
    repo.write("small/one.yaml", configmaps("cm-00", namespace="payment-production"))
    repo.write("apps/prod.yaml", application("payment-production", "big"))
    base = repo.commit("base")
    repo.write("apps/prod.yaml", application("payment-production", "small"))
    head = repo.commit("re-point production")
    proc = repo.diff(base, head, "apps/", "--fail-on-removal", "*-production", "--format", "json")
    assert proc.returncode == 1, proc.stderr
    [env] = json.loads(proc.stdout)["environments"]
    assert env["status"] == "redefined" and env["definition"] == ["source.path big -> small"]
    assert len(env["removed"]) == 29
    assert {r["cause"] for r in env["removed"]} == {
        "the Application's definition changed: source.path big -> small"
    }
    assert "refused by diff: destructive changes in payment-production" in proc.stderr


def test_changed_parameters_render_heads_values_and_count(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "gitops")
    shutil.copytree(EXAMPLE / "charts", repo.path / "charts")
    shutil.copytree(EXAMPLE / "clusters", repo.path / "clusters")
    prod = [{"name": "values-files", "array": ["../../clusters/production/payment-values.yaml"]}]
    repo.write("apps/prod.yaml", application("payment-production", "charts/payment", prod))
    base = repo.commit("base")
    repo.write("clusters/production/off.yaml", "enabled: false\n")
    off = [{"name": "values-files", "array": ["../../clusters/production/off.yaml"]}]
    repo.write("apps/prod.yaml", application("payment-production", "charts/payment", off))
    head = repo.commit("production values")
    proc = repo.diff(
        base, head, "apps/prod.yaml", "--fail-on-removal", "payment-production", "--format", "json"
    )
    assert proc.returncode == 1, proc.stderr
    [env] = json.loads(proc.stdout)["environments"]
    assert env["definition"] == [
        'parameter values-files ["../../clusters/production/payment-values.yaml"] -> ["../../clusters/production/off.yaml"]'
    ]
    removed = {r["resource"]: r["cause"] for r in env["removed"]}
    assert "Deployment.apps payment-production/payment-production" in removed
    assert "`enabled`" in removed["Deployment.apps payment-production/payment-production"]


@pytest.mark.parametrize("path", ["../outside", "/../outside", "apps/../../outside", "link"])
def test_source_path_must_stay_in_the_repository(tmp_path: Path, path: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text(configmaps("stolen"))
    repo = Repo(tmp_path / "gitops")
    repo.write("web/cm.yaml", configmaps("web"))
    (repo.path / "link").symlink_to(outside)
    repo.write("apps/web.yaml", application("web", "web"))
    base = repo.commit("base")
    repo.write("apps/web.yaml", application("web", path))
    head = repo.commit("escape")
    proc = repo.diff(base, head, "apps/")
    assert proc.returncode == 2
    assert f"source.path {path.strip('/')!r} of web leads outside the repository" in proc.stdout
    assert "stolen" not in proc.stdout + proc.stderr


def test_the_number_of_applications_and_the_time_are_bounded(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "gitops")
    repo.write("web/cm.yaml", configmaps("web"))
    for i in range(3):
        repo.write(f"apps/web{i}.yaml", application(f"web{i}", "web"))
    base = repo.commit("base")
    many = repo.diff(base, base, "apps/", "--max-apps", "2")
    assert many.returncode == 2
    assert "3 Applications to render exceed --max-apps 2" in many.stderr
    late = repo.diff(base, base, "apps/", "--timeout", "0.000001")
    assert (
        late.returncode == 2
        and "the diff ran past --timeout 1e-06s while reading the Applications and ApplicationSets"
        in late.stderr
    )
    assert repo.diff(base, base, "apps/", "--max-apps", "0").returncode == 2  # argparse: positive only
    assert len(repo.worktrees()) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_worktrees_are_removed_when_the_diff_is_killed(tmp_path: Path, signum: int) -> None:
    repo = Repo(tmp_path / "gitops")
    shutil.copytree(EXAMPLE / "charts", repo.path / "charts")
    repo.write("apps/prod.yaml", application("payment", "charts/payment"))
    repo.write("apps/staging.yaml", application("payment-staging", "charts/payment"))
    base = repo.commit("base")
    # head changes the chart: identical inputs would not be rendered at all (cmp_plugin/fingerprint.py)
    values = repo.path / "charts/payment/values.yaml"
    repo.write("charts/payment/values.yaml", values.read_text() + "\n# changed\n")
    head = repo.commit("head")
    marker = tmp_path / "helm-started"
    slow = tmp_path / "slow-helm"
    slow.write_text(f"#!/bin/sh\necho $$ > {marker}\nexec sleep 60\n")
    slow.chmod(0o755)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_HELM": str(slow),
        "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": str(tmp_path),  # the marker (the sandbox allows no other)
        "HOME": str(tmp_path),
        "TMPDIR": str(scratch),
    }
    proc = start_cmp(
        repo.path,
        env,
        "diff",
        "--base",
        base,
        "--head",
        head,
        "apps/",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: marker.exists() and marker.read_text().strip(), "the render to start")
        assert len(repo.worktrees()) == 3  # base and head are checked out while it renders
        proc.send_signal(signum)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        if marker.exists():
            pid = int(marker.read_text().strip())
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert code == 128 + signum
    assert len(repo.worktrees()) == 1
    assert not list(scratch.glob("driftguard-diff-*"))
    assert repo.git("status", "--porcelain") == ""

"""Fixtures for the CMP: a fresh copy of the test repository, and generate run as Argo CD runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

Generate = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of tests/cmp_plugin/repo: renders may write (helm dependency build) without touching the source."""
    dest = tmp_path / "checkout"
    shutil.copytree(HERE / "repo", dest)
    return dest


def cmp_env(app: str, params: list[dict[str, Any]] | None = None, **extra: str) -> dict[str, str]:
    """The environment argocd-cmp-server gives a plugin command (plus the tools' settings)."""
    env = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_HELM": os.environ["DRIFTGUARD_HELM"],
        "DRIFTGUARD_KUSTOMIZE": os.environ["DRIFTGUARD_KUSTOMIZE"],
        "ARGOCD_APP_NAME": "argocd_" + Path(app).name,
        "ARGOCD_APP_NAMESPACE": "apps",
        "ARGOCD_APP_REVISION": "0123456789abcdef0123456789abcdef01234567",
        "ARGOCD_APP_SOURCE_PATH": app,
        "ARGOCD_APP_SOURCE_REPO_URL": "https://git.example.com/platform/gitops.git",
        "KUBE_VERSION": "1.32.3",
        "KUBE_API_VERSIONS": "v1,apps/v1,batch/v1,rbac.authorization.k8s.io/v1,networking.k8s.io/v1",
    }
    if params is not None:
        env["ARGOCD_APP_PARAMETERS"] = json.dumps(params)
    env.update(extra)
    return env


def run_cmp(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m cmp_plugin ARGS` in ``cwd`` with exactly ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "cmp_plugin", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture
def generate(repo: Path) -> Generate:
    """Run `driftguard-cmp <command>` in <repo>/<app> with the CMP environment."""

    def run(
        app: str, params: list[dict[str, Any]] | None = None, *, command: str = "generate", **extra: str
    ) -> subprocess.CompletedProcess[str]:
        env = {
            "DRIFTGUARD_CMP_CACHE_DIR": str(repo.parent / "baseline-cache"),
            **cmp_env(app, params, **extra),
        }
        return subprocess.run(
            [sys.executable, "-m", "cmp_plugin", command],
            cwd=repo / app,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )

    return run

"""Fixtures for the CMP: a fresh copy of the test repository, and generate run as Argo CD runs it.

How a test runs the command (run_cmp, start_cmp, the callers FRONT and PYTHON_CALLER) is tests/helpers.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FRONT, PYTHON_CALLER, run_cmp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

Generate = Callable[..., subprocess.CompletedProcess[str]]
TOOL_DIRS = ":".join(
    sorted(
        {
            os.path.dirname(os.path.realpath(os.environ[k]))
            for k in ("DRIFTGUARD_HELM", "DRIFTGUARD_KUSTOMIZE")
        }
    )
)


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
        # the tools of this checkout (.tools/bin) are outside the system directories the sandbox opens
        "DRIFTGUARD_CMP_TOOL_READ_PATHS": TOOL_DIRS,
        "ARGOCD_APP_NAME": "argocd_" + Path(app).name,
        "ARGOCD_APP_NAMESPACE": "apps",
        "ARGOCD_APP_REVISION": "0123456789abcdef0123456789abcdef01234567",
        "ARGOCD_APP_SOURCE_PATH": app,
        "ARGOCD_APP_SOURCE_REPO_URL": "https://git.example.com/platform/gitops.git",
        "KUBE_VERSION": "1.32.3",
        "KUBE_API_VERSIONS": "v1,apps/v1,batch/v1,rbac.authorization.k8s.io/v1,networking.k8s.io/v1",
    }
    if "DRIFTGUARD_CMP_TOOL_WRITE_PATHS" in os.environ:  # a test's instrumented tool logs outside
        env["DRIFTGUARD_CMP_TOOL_WRITE_PATHS"] = os.environ["DRIFTGUARD_CMP_TOOL_WRITE_PATHS"]
    if "DRIFTGUARD_CMP_RENDER_CACHE_BYTES" in os.environ:  # a test of the launch plan turns it off
        env["DRIFTGUARD_CMP_RENDER_CACHE_BYTES"] = os.environ["DRIFTGUARD_CMP_RENDER_CACHE_BYTES"]
    if params is not None:
        env["ARGOCD_APP_PARAMETERS"] = json.dumps(params)
    env.update(extra)
    return env


# the image ships the native front: the fast lane runs each caller test with it, `make test-all`
# with pip's Python script too (the same protocol, held byte for byte by test_front.py)
@pytest.fixture(params=[pytest.param("python", marks=pytest.mark.slow), "native"])
def caller(request: pytest.FixtureRequest) -> list[str]:
    """``driftguard-cmp`` both ways it is installed: pip's Python script, or the image's native front."""
    return PYTHON_CALLER if request.param == "python" else [str(FRONT)]


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
        return run_cmp(repo / app, env, command)

    return run


def preload_servers(root: Path) -> list[int]:
    """The pids of the preload servers whose socket is under ``root`` (one may still be starting)."""
    marker = str(root).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"cmp_plugin.preload.server" in argv and any(a.startswith(marker) for a in argv):
            found.append(int(entry.name))
    return found


def kill_preload_servers(root: Path) -> None:
    """SIGKILL every preload server whose socket is under ``root`` (one may still be starting).

    A server lives as long as its socket (cmp_plugin/preload/server.py) and pytest keeps old temporary
    directories, so a test that started one must not leave it behind, whatever the test did.
    """
    for pid in preload_servers(root):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def no_preload_servers_left(tmp_path: Path) -> Iterator[None]:
    yield
    kill_preload_servers(tmp_path)

"""Git repositories built by a test: files written, committed, revisions returned; plus diff runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from standins import processes

from .conftest import run_cmp

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gitops"
REPO_URL = "https://git.example.com/platform/gitops.git"


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")
        self.git("remote", "add", "origin", "git@git.example.com:platform/gitops.git")

    def git(self, *args: str) -> str:
        return processes.git(self.path, *args, env=os.environ)

    def write(self, rel: str, content: str | dict[str, Any] | list[Any]) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False)
        target.write_text(text)
        return target

    def remove(self, rel: str) -> None:
        target = self.path / rel
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def diff(self, base: str, head: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ["PATH"],
            "DRIFTGUARD_HELM": os.environ["DRIFTGUARD_HELM"],
            "DRIFTGUARD_KUSTOMIZE": os.environ["DRIFTGUARD_KUSTOMIZE"],
            "HOME": str(self.path.parent),
        }
        return run_cmp(self.path, env, "diff", "--base", base, "--head", head, *args)

    def worktrees(self) -> list[str]:
        return self.git("worktree", "list").splitlines()


def configmaps(*names: str, namespace: str = "apps") -> str:
    """A plain-directory manifest with one ConfigMap per name."""
    return "".join(
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {n}\n  namespace: {namespace}\ndata:\n  k: v\n"
        for n in names
    )


def appset(
    name: str, generators: list[dict[str, Any]], *, app_name: str, path: str, **spec: Any
) -> dict[str, Any]:
    """An ApplicationSet whose template renders ``path`` with the driftguard plugin."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "ApplicationSet",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {
            "generators": generators,
            "template": {
                "metadata": {"name": app_name},
                "spec": {
                    "project": "default",
                    "source": {
                        "repoURL": REPO_URL,
                        "targetRevision": "HEAD",
                        "path": path,
                        "plugin": {"name": "driftguard"},
                    },
                    "destination": {"server": "https://kubernetes.default.svc", "namespace": "apps"},
                },
            },
            **spec,
        },
    }


def git_dirs(*patterns: str, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "git": {
            "repoURL": REPO_URL,
            "revision": "HEAD",
            "directories": [{"path": p} for p in patterns] + [{"path": p, "exclude": True} for p in exclude],
        }
    }


def payment_repo(path: Path) -> Repo:
    """The post-mortem's layout: charts/payment, clusters/<env>/payment/payment (an umbrella chart
    over charts/payment), apps/payment.yaml (a git directory ApplicationSet). Staging sets
    ``enabled: true`` itself, production relies on the chart default."""
    repo = Repo(path)
    shutil.copytree(EXAMPLE / "charts", path / "charts")
    for env, values in (
        ("staging", "payment:\n  enabled: true\n  replicas: 2\n"),
        ("production", "payment:\n  replicas: 6\n"),
    ):
        app = f"clusters/{env}/payment/payment"
        repo.write(
            f"{app}/Chart.yaml",
            f"apiVersion: v2\nname: payment-{env}\nversion: 0.1.0\ndependencies:\n"
            "  - name: payment\n    version: 1.4.0\n    repository: file://../../../../charts/payment\n",
        )
        repo.write(f"{app}/values.yaml", values)
        (path / app / "charts").mkdir()
        (path / app / "charts" / "payment").symlink_to("../../../../../charts/payment")
    spec = appset(
        "payment",
        [git_dirs("clusters/*/payment/*")],
        app_name="{{path.basename}}-{{path[1]}}",
        path="{{path}}",
    )
    spec["spec"]["template"]["spec"]["destination"]["namespace"] = "payment-{{path[1]}}"
    spec["spec"]["template"]["spec"]["syncPolicy"] = {"automated": {"prune": True, "allowEmpty": True}}
    repo.write("apps/payment.yaml", spec)
    return repo

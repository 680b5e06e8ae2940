"""Git repositories built by a test: files written, committed, revisions returned; plus diff runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import git, run_cmp

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gitops"
POSTMORTEM = ROOT / "examples" / "postmortem"
REPO_URL = "https://git.example.com/platform/gitops.git"


class Repo:
    def __init__(self, path: Path, *, exists: bool = False) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=exists)
        self.git("init", "-q", "-b", "main")
        self.git("remote", "add", "origin", "git@git.example.com:platform/gitops.git")

    def git(self, *args: str) -> str:
        return git(self.path, *args)

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
    """A copy of examples/postmortem (the post-mortem's layout: charts/payment, one umbrella chart
    per clusters/<cluster>/payment/payment, apps/payment.yaml a git directory ApplicationSet)."""
    shutil.copytree(POSTMORTEM, path, symlinks=True)
    (path / "README.md").unlink()
    return Repo(path, exists=True)

"""Both revisions checked out as git worktrees in a temporary directory, removed on exit and signals.

SIGINT, SIGTERM and SIGHUP end the diff through the same clean-up as a normal exit; the user's
checkout is never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from driftguard.errors import InputError

__all__ = ["git", "relative", "remotes", "worktrees"]


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise InputError(f"git {' '.join(args)} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout.strip()


@contextlib.contextmanager
def worktrees(root: Path, shas: dict[str, str]) -> Iterator[dict[str, Path]]:
    """Detached worktrees of each revision, removed however the diff ends (signals included)."""
    trees: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="driftguard-diff-") as tmp, _signals_exit():
        try:
            for label, sha in shas.items():
                trees[label] = Path(tmp) / label
                git(root, "worktree", "add", "--detach", "--quiet", str(trees[label]), sha)
            yield trees
        finally:
            with _signals_deferred():
                for tree in trees.values():
                    subprocess.run(
                        ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                        capture_output=True,
                        check=False,
                    )
                    shutil.rmtree(tree, ignore_errors=True)
                subprocess.run(
                    ["git", "-C", str(root), "worktree", "prune"], capture_output=True, check=False
                )


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _signals_exit() -> Iterator[None]:
    """SIGINT/SIGTERM/SIGHUP raise SystemExit(128+n) so every ``finally`` (worktree removal) runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    old = {s: signal.signal(s, leave) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """While cleaning up, a second signal must not cut the cleanup short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def remotes(root: Path) -> list[str]:
    try:
        out = git(root, "remote", "-v")
    except InputError:
        return []
    return sorted({line.split()[1] for line in out.splitlines() if len(line.split()) >= 2})


def relative(target: str, cwd: Path, root: Path) -> str:
    """A target (path or glob, relative to where the user stands) relative to the repository root."""
    where = Path(os.path.normpath(cwd.resolve() / target))
    if not where.is_relative_to(root.resolve()):
        raise InputError(f"target {target} is outside the repository {root}")
    return str(where.relative_to(root.resolve()))

"""`driftguard-cmp diff` shows which Application it renders on a terminal, and nothing in CI or
when stderr is a pipe or a file (the PR check's log stays as it was)."""

from __future__ import annotations

import io
import os
import pty
import subprocess
from pathlib import Path

import pytest

from cmp_plugin.prcheck.diffcmd import progress_reporter
from tests.helpers import run_cmp

from .gitrepo import Repo, configmaps
from .test_diff_like_with_like import application


def repo_with_apps(tmp_path: Path, n: int) -> tuple[Repo, str]:
    repo = Repo(tmp_path / "gitops")
    repo.write("web/cm.yaml", configmaps("web"))
    for i in range(n):
        repo.write(f"apps/web{i}.yaml", application(f"web{i}", "web"))
    return repo, repo.commit("base")


def diff_with_stderr_on_a_terminal(repo: Repo, base: str, env: dict[str, str]) -> tuple[int, str]:
    primary, secondary = pty.openpty()
    try:
        proc = run_cmp(
            repo.path,
            env,
            "diff",
            "--base",
            base,
            "--head",
            base,
            "apps/",
            stdout=subprocess.PIPE,
            stderr=secondary,
        )
        os.close(secondary)
        secondary = -1
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if secondary != -1:
            os.close(secondary)
        os.close(primary)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    keep = ("PATH", "DRIFTGUARD_HELM", "DRIFTGUARD_KUSTOMIZE")
    return {k: os.environ[k] for k in keep if k in os.environ} | {"HOME": str(tmp_path)} | extra


def test_a_terminal_sees_each_application_and_a_clean_line_after(tmp_path: Path) -> None:
    repo, base = repo_with_apps(tmp_path, 3)
    code, terminal = diff_with_stderr_on_a_terminal(repo, base, clean_env(tmp_path))
    assert code == 0, terminal
    for i, name in enumerate(["web0", "web1", "web2"], 1):
        assert f"rendering {i}/3 {name}" in terminal
    assert terminal.endswith("\r\x1b[K")  # the line is cleared before the report


@pytest.mark.parametrize("ci", ["true", "1"])
def test_ci_stays_quiet_even_on_a_terminal(tmp_path: Path, ci: str) -> None:
    repo, base = repo_with_apps(tmp_path, 2)
    code, terminal = diff_with_stderr_on_a_terminal(repo, base, clean_env(tmp_path, CI=ci))
    assert code == 0 and "rendering" not in terminal, terminal


def test_a_pipe_stays_quiet(tmp_path: Path) -> None:
    repo, base = repo_with_apps(tmp_path, 2)
    out = repo.diff(base, base, "apps/")
    assert out.returncode == 0 and out.stderr == "", out.stderr


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_name_from_the_repository_cannot_drive_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    term = Terminal()
    report = progress_reporter(term)
    assert report is not None
    report(0, 1, "web\x1b]0;owned\x07\x1b[2J" + "x" * 200)
    line = term.getvalue().removeprefix("\r\x1b[K")
    assert "\x1b" not in line and "\x07" not in line
    assert len(line) < 140
    assert progress_reporter(io.StringIO()) is None  # not a terminal

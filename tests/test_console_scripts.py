"""Every console script: --version, its subcommands in --help, and no traceback when the reader of
its output goes away (`... | head`). Run as installed (the venv's scripts), not imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from driftguard.console import SIGPIPE_STATUS
from standins.argo_api import FakeArgo
from standins.drill import inference_desired, inference_live, serve_drill

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
# driftguard-cmp's --version (with the helm and kustomize versions it renders with) is issue 28's
OURS = sorted(name for name in SCRIPTS if not name.startswith("driftguard-cmp"))
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def run(*argv: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60, **kwargs)  # type: ignore[call-overload, no-any-return]


@pytest.mark.parametrize("script", OURS)
def test_every_console_script_says_its_version(script: str) -> None:
    out = run(str(BIN / script), "--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{script} {VERSION}"


def test_the_version_is_the_projects() -> None:
    from driftguard import __version__

    assert __version__ == VERSION


def test_the_notifier_help_lists_every_subcommand() -> None:
    from notifier.cli import COMMANDS

    out = run(str(BIN / "driftguard-notifier"), "--help")
    assert out.returncode == 0
    assert set(COMMANDS) == {"incidents", "preview"}
    for command in COMMANDS:
        assert f"\n  {command} " in out.stdout, out.stdout
        assert run(str(BIN / "driftguard-notifier"), command, "--help").returncode == 0


def test_the_driftguard_help_lists_diff() -> None:
    assert "diff" in run(str(BIN / "driftguard"), "--help").stdout


def closed_pipe(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run with stdout a pipe nobody reads: its read end is closed before the child starts, so the
    first write fails as it does under `| head` once head has exited."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            argv,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        )
    finally:
        os.close(write)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", proc.stderr)


def test_preview_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    fake = FakeArgo()
    serve_drill(fake)
    (tmp_path / "app.json").write_text(json.dumps(fake.apps[("argocd", "deepseek-inference")]))
    (tmp_path / "managed.json").write_text(json.dumps(fake.managed[("argocd", "deepseek-inference")]))
    argv = [str(BIN / "driftguard-notifier"), "preview", "--channel", "slack", "--locale", "en"]
    argv += ["--app", str(tmp_path / "app.json"), "--managed-resources", str(tmp_path / "managed.json")]
    out = closed_pipe(argv, tmp_path)
    assert out.stderr == "" and out.returncode == SIGPIPE_STATUS, out.stderr


def test_diff_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(inference_desired()))
    (tmp_path / "l.yaml").write_text(yaml.safe_dump(inference_live()))
    argv = [
        str(BIN / "driftguard"),
        "diff",
        "--desired",
        str(tmp_path / "d.yaml"),
        "--live",
        str(tmp_path / "l.yaml"),
    ]
    out = closed_pipe(argv, tmp_path)
    assert out.stderr == "" and out.returncode == SIGPIPE_STATUS, out.stderr


def test_the_closed_pipe_would_show_a_traceback_without_the_guard(tmp_path: Path) -> None:
    # the same closed pipe under a bare print: what the scripts did before
    out = closed_pipe([sys.executable, "-c", "print('x' * 100)"], tmp_path)
    assert "BrokenPipeError" in out.stderr

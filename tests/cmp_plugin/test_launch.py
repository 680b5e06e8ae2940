"""The launch plan: generate starts the previous render's command first and uses it only if it is exact."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cmp_plugin import launch, paths

from .conftest import Generate

APP = "charts/platform"


@pytest.fixture
def helm_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A helm that records each start (pid and arguments) and then becomes the real helm."""
    # in a directory of their own: what a tool may read or write never holds the plugin's cache
    # (a plan there could be a tool's; sandbox.reaches)
    (tmp_path / "tool").mkdir()
    log = tmp_path / "tool" / "helm-starts.jsonl"
    wrapper = tmp_path / "tool" / "helm"
    # sh, not Python: it logs within a millisecond, before a planned start can be stopped (a Python
    # wrapper took ~20 ms, and under load the plugin sometimes killed it before it wrote its line)
    wrapper.write_text(
        "#!/bin/sh\n"
        'args=""\n'
        'for a in "$@"; do args="$args${args:+, }\\"$a\\""; done\n'
        f'printf \'{{"pid": %s, "argv": [%s]}}\\n\' "$$" "$args" >> \'{log}\'\n'
        f"exec '{os.environ['DRIFTGUARD_HELM']}' \"$@\"\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("DRIFTGUARD_HELM", str(wrapper))  # cmp_env passes it to the plugin
    # the instrumented helm logs beside the test: the only place outside its scratch it may write
    monkeypatch.setenv("DRIFTGUARD_CMP_TOOL_WRITE_PATHS", str(log.parent))
    # the plan is used with the render cache off (launch.render_cache_on)
    monkeypatch.setenv("DRIFTGUARD_CMP_RENDER_CACHE_BYTES", "0")
    return log


def starts(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def alive(pid: object) -> bool:
    assert isinstance(pid, int)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def plan(repo: Path) -> Path:
    return Path(launch.plan_file(str(repo.parent / "baseline-cache"), "argocd_platform"))


def test_the_second_render_adopts_the_planned_helm(generate: Generate, repo: Path, helm_log: Path) -> None:
    first = generate(APP)
    assert first.returncode == 0, first.stderr
    assert len(starts(helm_log)) == 1 and plan(repo).is_file()
    second = generate(APP)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert len(starts(helm_log)) == 2  # one helm per render: the planned one was used
    assert str(repo) not in plan(repo).read_text()  # paths are kept relative to the checkout


def test_a_moved_checkout_still_uses_the_plan(generate: Generate, repo: Path, helm_log: Path) -> None:
    # Argo CD extracts every revision into a new directory
    assert generate(APP).returncode == 0
    moved = repo.parent / "another-revision"
    repo.rename(moved)
    moved.mkdir(exist_ok=True)
    repo.symlink_to(moved)  # the fixture's generate still runs in <repo>/<app>
    again = generate(APP)
    assert again.returncode == 0, again.stderr
    assert len(starts(helm_log)) == 2
    assert str(moved) in " ".join(map(str, starts(helm_log)[-1]["argv"]))  # type: ignore[call-overload]


def test_a_changed_command_stops_the_planned_helm_and_starts_the_right_one(
    generate: Generate, helm_log: Path
) -> None:
    assert generate(APP).returncode == 0
    upgraded = generate(APP, KUBE_VERSION="1.31.4")  # the destination cluster changed: --kube-version
    assert upgraded.returncode == 0, upgraded.stderr
    early, real = starts(helm_log)[1:]
    assert "1.32.3" in early["argv"] and "1.31.4" in real["argv"]  # type: ignore[operator]
    assert not alive(early["pid"])
    third = generate(APP, KUBE_VERSION="1.31.4")  # the plan now holds the new command
    assert third.returncode == 0 and len(starts(helm_log)) == 4
    assert third.stdout == upgraded.stdout


def test_inline_values_are_never_planned(generate: Generate, repo: Path, helm_log: Path) -> None:
    params = [{"name": "values", "string": "teams: [a]\n"}]
    for _ in range(2):
        proc = generate(APP, params)
        assert proc.returncode == 0, proc.stderr
    assert len(starts(helm_log)) == 2 and not plan(repo).exists()


def test_a_failing_check_stops_the_planned_helm_and_leaves_no_scratch(
    generate: Generate, repo: Path, helm_log: Path, tmp_path: Path
) -> None:
    scratch_root = tmp_path / "sidecar-tmp"
    scratch_root.mkdir()
    assert generate(APP, TMPDIR=str(scratch_root)).returncode == 0
    bad = generate(
        APP, [{"name": "values-files", "array": ["../../../../etc/passwd"]}], TMPDIR=str(scratch_root)
    )
    assert bad.returncode != 0 and "outside the repository checkout" in bad.stderr
    early = starts(helm_log)[-1]
    assert not alive(early["pid"])
    assert [p.name for p in scratch_root.iterdir()] == []  # no driftguard-* scratch left behind


def test_a_corrupt_plan_is_ignored_and_replaced(generate: Generate, repo: Path, helm_log: Path) -> None:
    assert generate(APP).returncode == 0
    plan(repo).write_bytes(b"\x1e\x1fnot a plan\xff")
    proc = generate(APP)
    assert proc.returncode == 0, proc.stderr
    assert len(starts(helm_log)) == 2
    assert plan(repo).read_text().startswith(launch.MAGIC)


def test_repo_root_matches_the_source_path_or_the_nearest_git(tmp_path: Path) -> None:
    assert paths.repo_root("/w/repo/apps/web", "apps/web") == "/w/repo"
    assert paths.repo_root("/w/repo/apps/web", "./apps/web/") == "/w/repo"
    (tmp_path / "r" / ".git").mkdir(parents=True)
    (tmp_path / "r" / "a" / "b").mkdir(parents=True)
    assert paths.repo_root(str(tmp_path / "r" / "a" / "b"), "elsewhere") == str(tmp_path / "r")
    assert paths.repo_root(str(tmp_path / "r" / "a" / "b"), "") == str(tmp_path / "r")
    assert paths.safe_name("team-a_web/x y").startswith("team-a_web_x_y-")
    assert paths.safe_name("a/b") != paths.safe_name("a_b")  # cleaned alike, kept apart


def test_a_dependency_build_stops_the_planned_helm_first(
    generate: Generate, repo: Path, helm_log: Path
) -> None:
    web = "charts/web"
    assert generate(web).returncode == 0  # builds the file:// dependency, so nothing is planned yet
    second = generate(web)  # everything vendored now: planned
    assert second.returncode == 0, second.stderr
    for tgz in (repo / web / "charts").glob("common-*.tgz"):
        tgz.unlink()  # the next revision lost the vendored dependency
    third = generate(web)
    assert third.returncode == 0, third.stderr
    assert third.stdout == second.stdout
    early, build, real = starts(helm_log)[-3:]
    assert early["argv"][0] == "template" and build["argv"][:2] == ["dependency", "build"]  # type: ignore[index]
    assert real["argv"][0] == "template" and not alive(early["pid"])  # type: ignore[index]

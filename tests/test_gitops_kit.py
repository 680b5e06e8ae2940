"""The GitOps kit's PR workflow: pinned actions, least privilege, no script injection, real flags."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from cmp_plugin.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "examples" / "gitops-kit" / ".github" / "workflows" / "driftguard-diff.yaml"


def workflow() -> dict[Any, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(doc, dict)
    return doc


def steps() -> list[dict[str, Any]]:
    return list(workflow()["jobs"]["diff"]["steps"])


def test_every_action_is_pinned_to_a_commit_with_its_version_named() -> None:
    uses = re.findall(r"uses: (\S+)@(\S+)( # v[\d.]+)?", WORKFLOW.read_text())
    assert len(uses) >= 4
    for action, ref, version in uses:
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{action} is pinned to {ref}, not a commit SHA"
        assert version, f"{action}@{ref} says no version"


def test_least_privilege() -> None:
    doc = workflow()
    assert doc["permissions"] == {}
    assert doc["jobs"]["diff"]["permissions"] == {"contents": "read", "pull-requests": "write"}
    # pull_request, never pull_request_target: a fork's PR runs without the repository's secrets
    assert list(doc[True]) == ["pull_request"]  # YAML 1.1 reads the key `on` as True
    for step in steps():
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


def test_no_expression_is_expanded_inside_a_shell_script() -> None:
    # ${{ }} in `run:` is pasted into the script before it runs: a branch name could inject code
    for step in steps():
        assert "${{" not in step.get("run", ""), step["name"]


def test_the_diff_command_is_one_the_cli_accepts() -> None:
    [diff] = [s for s in steps() if s.get("id") == "diff"]
    line = diff["run"].replace("\\\n", " ")
    command = next(c for c in line.splitlines() if c.strip().startswith("driftguard-cmp"))
    argv = shlex.split(command.split(">")[0])[1:]
    argv = [a.replace("$BASE_REF", "main") for a in argv]
    args = build_parser().parse_args(argv)
    assert args.format == "markdown"
    assert args.fail_on_removal == ["*-production"]
    assert args.base == "origin/main" and args.head == "HEAD"


def test_the_comment_is_updated_not_repeated() -> None:
    [comment] = [s for s in steps() if s.get("uses", "").startswith("actions/github-script@")]
    script = comment["with"]["script"]
    assert "updateComment" in script and "createComment" in script
    assert "<!-- driftguard-diff -->" in script
    assert "65,536" in script  # GitHub's comment size limit is handled

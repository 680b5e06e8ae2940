"""The GitOps kit's codify workflow: manual dispatch only, pinned, least privilege, no injection."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from cmp_plugin.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "examples" / "gitops-kit" / ".github" / "workflows" / "driftguard-codify.yaml"


def workflow() -> dict[Any, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(doc, dict)
    return doc


def steps() -> list[dict[str, Any]]:
    return list(workflow()["jobs"]["codify"]["steps"])


def test_manual_dispatch_with_the_alerts_arguments_only() -> None:
    on = workflow()[True]  # YAML 1.1 reads the key `on` as True
    assert list(on) == ["workflow_dispatch"]
    assert list(on["workflow_dispatch"]["inputs"]) == ["arguments"]


def test_pinned_and_least_privilege() -> None:
    uses = re.findall(r"uses: (\S+)@(\S+) # v[\d.]+", WORKFLOW.read_text())
    assert len(uses) == 4 and all(re.fullmatch(r"[0-9a-f]{40}", ref) for _, ref in uses)
    doc = workflow()
    assert doc["permissions"] == {}
    assert doc["jobs"]["codify"]["permissions"] == {"contents": "write", "pull-requests": "write"}
    for step in steps():
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


def test_the_input_never_reaches_a_shell() -> None:
    for step in steps():
        assert "${{" not in step.get("run", ""), step["name"]
    [codify] = [s for s in steps() if s.get("id") == "codify"]
    assert codify["env"] == {"CODIFY_ARGUMENTS": "${{ inputs.arguments }}"}
    assert "shlex.split" in codify["run"] and "shell=True" not in codify["run"]
    assert 'a != "--write"' in codify["run"]  # --write is the workflow's, not the input's


def test_the_alerts_arguments_parse_as_codify_does() -> None:
    example = workflow()[True]["workflow_dispatch"]["inputs"]["arguments"]["description"]
    argv = shlex.split(example.split("e.g. ", 1)[1])
    args = build_parser().parse_args(["codify", *argv, "--write"])
    assert args.target == Path("apps/inference.yaml") and args.write
    assert args.change == ["Deployment/ai-serving/deepseek-inference:/spec/replicas=4"]


def test_the_pr_carries_the_edit_and_the_proof() -> None:
    [pr] = [s for s in steps() if s.get("uses", "").startswith("actions/github-script@")]
    script = pr["with"]["script"]
    assert "pulls.create" in script and "process.env.EDIT" in script and "process.env.PROOF" in script
    assert "65,536" in script


def test_the_codify_step_is_valid_python() -> None:
    [codify] = [s for s in steps() if s.get("id") == "codify"]
    code = codify["run"].split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    compile(code, "driftguard-codify.yaml", "exec")

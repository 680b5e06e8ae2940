"""The alert for a human change carries the exact codify command, in every channel and locale.

The Application is the drill's (examples/gitops/apps/inference.yaml); the line must survive each
channel's escaping as a command codify's own parser reads back into the same change.
"""

from __future__ import annotations

import html
import shlex
from pathlib import Path

import pytest
import yaml

from cmp_plugin.cli import build_parser
from cmp_plugin.repotools.codify_spec import Change, parse_change
from driftguard.diff import FieldChange
from driftguard.drift import HUMAN, Actor, Classified, ResourceDrift
from driftguard.manifests import ResourceKey
from driftguard.report import AppInfo, DriftReport
from standins.receivers import Receivers

from .test_messages import _markdown, _sections, send_all

ROOT = Path(__file__).resolve().parents[2]
GPU = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"


def drill() -> DriftReport:
    app = AppInfo.from_application(yaml.safe_load((ROOT / "examples/gitops/apps/inference.yaml").read_text()))
    key = ResourceKey("apps", "Deployment", "ai-serving", "deepseek-inference")
    change = Classified(key, FieldChange(GPU, "replace", "2", "4"), HUMAN, Actor("kubectl-patch"))
    return DriftReport(app, [ResourceDrift(key, "modified", [change])])


def _command(text: str, word: str) -> str:
    [line] = [ln for ln in text.splitlines() if word in ln]
    return html.unescape(line.split("`")[1])


@pytest.mark.parametrize(("locale", "word"), [("en", "keep it in Git"), ("zh-CN", "保留此修改")])
def test_every_channel_carries_the_exact_command(rx: Receivers, locale: str, word: str) -> None:
    msgs = send_all(rx, drill(), locale)
    lines = {
        "feishu": _command(_markdown(msgs["feishu"]), word),
        "slack": _command(_sections(msgs["slack"]), word),
        "pagerduty": msgs["pagerduty"]["payload"]["custom_details"]["changes"][0]["codify"],
    }
    expected = (
        "driftguard-cmp codify charts/inference --values-file ../../clusters/production/inference-values.yaml "
        f"--app-name deepseek-inference --namespace ai-serving --change 'Deployment/ai-serving/deepseek-inference:{GPU}=\"4\"'"
    )
    assert lines == dict.fromkeys(lines, expected)
    argv = shlex.split(expected)[1:]
    args = build_parser().parse_args(argv)
    assert [parse_change(s) for s in args.change] == [
        Change("Deployment", "ai-serving", "deepseek-inference", GPU, "4")
    ]


def test_no_line_for_a_masked_value_or_an_app_without_a_path(rx: Receivers) -> None:
    report = drill()
    key = report.resources[0].key
    masked = Classified(key, FieldChange("/data/password", "replace", "***(a)", "***(b)"), HUMAN)
    report.resources = [ResourceDrift(key, "modified", [masked])]
    msgs = send_all(rx, report, "en")
    assert "keep it in Git" not in _markdown(msgs["feishu"]) and "codify" not in _sections(msgs["slack"])
    assert AppInfo.from_application({"metadata": {"name": "x"}, "spec": {}}).codify == ""

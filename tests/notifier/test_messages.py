"""Issue 18: one message per channel for any report, within every channel's documented limits, escaped.

The done-when cases (the seed-scale prune, a 60-change resource, the injection strings, a
253-character app name) are sent through the real HTTP path and checked as the receivers
captured them; a hypothesis test renders generated reports of every size and shape into every
channel and locale and checks each limit and that the "more" line tells the truth.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftguard.cause import (
    CHART_DEFAULT,
    FAILED,
    VALUE,
    Cause,
    GatingKey,
    cause_from_application,
    gating_line,
    refusal_headline,
)
from driftguard.diff import FieldChange, ListSeg
from driftguard.drift import HUMAN, MISSING, PRUNE_CANDIDATE, Actor, Classified, ResourceDrift
from driftguard.manifests import ResourceKey
from driftguard.report import AppInfo, DriftReport
from notifier.channels import build_channels
from notifier.channels._http import HttpSender
from notifier.config import parse_config
from notifier.render import Templates, view
from standins.receivers import Receivers
from tests.helpers import examples

TEMPLATES = Templates()
LINK = "https://argocd.example.com/applications/argocd/"
INJECTION = (
    "<at id=all></at>",
    "[点我](https://evil.example)",
    "`rm -rf` *bold* _it_ ~strike~",
    "<!channel> <https://evil.example|click> &amp;",
)


def channels(rx: Receivers | None, locale: str) -> dict[str, Any]:
    base = rx.url if rx else "https://hooks.example.com"
    raw = {
        "locale": locale,
        "channels": {
            "feishu": {"type": "feishu", "url": base + "/feishu", "secret": "s3cret"},
            "slack": {"type": "slack", "url": base + "/slack", "locale": locale},
            "pagerduty": {
                "type": "pagerduty",
                "url": base + "/pagerduty",
                "routing_key": "0" * 32,
                "locale": locale,
            },
        },
    }
    return build_channels(parse_config(raw), TEMPLATES)


OFFLINE = {locale: channels(None, locale) for locale in ("zh-CN", "en")}


def app(name: str = "shop") -> AppInfo:
    return AppInfo(
        name,
        project="shop",
        cluster="prod-1",
        destination_namespace="shop",
        revision="0123456789abcdef0123456789abcdef01234567",
        sync_status="OutOfSync",
        health_status="Healthy",
    )


def gone(kind: str, n: int, cls: str, group: str = "") -> list[ResourceDrift]:
    out = []
    for i in range(n):
        key = ResourceKey(group, kind, "shop", f"{kind.lower()}-{i:04d}")
        out.append(
            ResourceDrift(key, cls, [Classified(key, FieldChange("", "remove", {"big": "x"}, None), cls)])
        )
    return out


def seed_prune() -> DriftReport:
    return DriftReport(
        app("seed"),
        gone("Deployment", 412, PRUNE_CANDIDATE, "apps")
        + gone("Service", 1140, PRUNE_CANDIDATE)
        + gone("PersistentVolumeClaim", 86, PRUNE_CANDIDATE),
    )


def sixty_changes() -> DriftReport:
    key = ResourceKey("apps", "Deployment", "shop", "api")
    changes = [
        Classified(
            key,
            FieldChange(f"/spec/template/spec/containers/0/env/{i}/value", "replace", "a" * 900, "b" * 900),
            HUMAN,
            Actor("kubectl-edit", "Update", f"2026-11-29T14:{i:02d}:00Z"),
        )
        for i in range(60)
    ]
    return DriftReport(app(), [ResourceDrift(key, "modified", changes)])


def injected() -> DriftReport:
    key = ResourceKey("", "ConfigMap", "shop", "settings")
    changes = [
        Classified(key, FieldChange(f"/data/k{i}", "replace", "old", value), HUMAN, Actor(value, "Update"))
        for i, value in enumerate(INJECTION)
    ]
    orphan = ResourceKey("", "ConfigMap", "shop", "legacy")
    prune = Classified(
        orphan, FieldChange("", "remove", {"data": {"x": INJECTION[0]}}, None), PRUNE_CANDIDATE
    )
    return DriftReport(
        app(), [ResourceDrift(key, "modified", changes), ResourceDrift(orphan, PRUNE_CANDIDATE, [prune])]
    )


def long_name() -> DriftReport:
    name = ("a" * 62 + ".") * 4
    name = name[:253]
    key = ResourceKey("apps", "Deployment", "shop", name)
    change = Classified(key, FieldChange("/spec/replicas", "replace", 1, 5), HUMAN, Actor("kubectl-scale"))
    return DriftReport(app(name), [ResourceDrift(key, "modified", [change])])


def refusal(reason: str, *gating: GatingKey, guard: str = "shrink") -> Cause:
    """The cause as the notifier reads it from the ComparisonError Argo CD makes of the CMP's stderr."""
    stderr = "\n".join(
        [
            refusal_headline(guard, reason),
            "  Deployment.apps shop/api  <- hidden by the chart default of enabled (templates/deployment.yaml:1)",
            *map(gating_line, gating),
            "fix: annotate the Application",
        ]
    )
    message = (
        "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown"
        " desc = error generating manifests in cmp: rpc error: code = Unknown desc = error generating"
        " manifests: `driftguard-cmp generate` failed exit status 3: " + stderr
    )
    cause = cause_from_application(
        {"status": {"conditions": [{"type": "ComparisonError", "message": message}]}}
    )
    assert cause is not None
    return cause


def refused_prune() -> DriftReport:
    """The seed prune when the CMP refused the render: Argo CD has no target, everything live is a prune candidate."""
    report = seed_prune()
    report.cause = refusal(
        "the render would prune 1638 of 1638 resources the Application manages (1638 > max-prune-count 10)",
        GatingKey("enabled", CHART_DEFAULT, "templates/deployment.yaml:1"),
    )
    return report


CASES = {
    "seed-prune": seed_prune,
    "refused-prune": refused_prune,
    "sixty-changes": sixty_changes,
    "injection": injected,
    "long-name": long_name,
}


# what the Slack fallback says in its own words (templates slack.*.j2, macro fallback): a generated
# value equal to one of them is not a leak
FALLBACK_WORDS = frozenset(
    [
        "critical",
        "warning",
        "error",
        "info",
        "change",
        "changed",
        "changes",
        "look",
        "would",
        "pruned",
        "prune",
        "missing",
        "newest",
        "replicas",
        "image",
    ]
)


def check_limits(kind: str, body: bytes, report: DriftReport | None = None) -> dict[str, Any]:
    """Every documented limit of the channel, on the bytes as sent."""
    msg: dict[str, Any] = json.loads(body)
    if kind == "slack" and report is not None:  # the phone's fallback: words, never values or objects
        for c in report.alerting:
            for value in (c.change.old, c.change.new):
                if isinstance(value, dict | list) and value:
                    assert json.dumps(value, ensure_ascii=False) not in msg["text"]
                # a value long enough not to be one of the fallback's own words ("prune", "changed")
                if isinstance(value, str) and len(value) > 3 and value not in FALLBACK_WORDS:
                    assert value not in msg["text"]
    if kind == "feishu":
        assert len(body) <= 20 * 1024
        card = msg["card"]
        assert card["schema"] == "2.0" and "elements" in card["body"] and "elements" not in card
        assert {e["tag"] for e in card["body"]["elements"]} <= {"markdown", "hr", "button"}
    elif kind == "slack":
        blocks = msg["blocks"]
        assert len(blocks) <= 50
        for b in blocks:
            for e in b.get("elements", []):
                assert len(e["text"]["text"]) <= 75 and len(e["url"]) <= 3000
        for b in blocks:
            if b["type"] == "header":
                assert len(b["text"]["text"]) <= 150
            if b["type"] == "section":
                text = b["text"]["text"]
                assert len(text) <= 3000
                fenced = False  # a quoted Argo CD message keeps its lines in a ``` block
                for line in text.split("\n"):
                    if line == "```":
                        fenced = not fenced
                    elif fenced:
                        assert "`" not in line, line  # nothing inside can close the block
                    else:
                        assert line.count("`") % 2 == 0, line  # every code span closed on its line
                assert not fenced, text
        assert len(msg["text"]) <= 3000 and "<" not in msg["text"]
    else:
        assert len(body) <= 512 * 1024
        assert len(msg["dedup_key"]) <= 255
        if msg["event_action"] == "trigger":
            assert len(msg["payload"]["summary"]) <= 1024
            details = json.dumps(msg["payload"]["custom_details"], ensure_ascii=False).encode()
            assert len(details) <= 64 * 1024
    return msg


def send_all(rx: Receivers, report: DriftReport, locale: str) -> dict[str, dict[str, Any]]:
    sender = HttpSender()
    v = view(report, link=LINK + report.app.name)
    out = {}
    for name, ch in channels(rx, locale).items():
        sender.send(ch, ch.payload(v, kind="alert"))
        [captured] = rx.on("/" + name)
        out[name] = check_limits(name, captured.body, report)
    return out


@pytest.mark.parametrize("locale", ["zh-CN", "en"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_done_when_case_is_one_message_per_channel_within_every_limit(
    case: str, locale: str, rx: Receivers
) -> None:
    report = CASES[case]()
    msgs = send_all(rx, report, locale)
    assert len(rx.captured) == 3 and set(msgs) == {"feishu", "slack", "pagerduty"}
    colour = {"critical": "red", "error": "orange", "warning": "yellow", "info": "blue"}
    assert msgs["feishu"]["card"]["header"]["template"] == colour[msgs["pagerduty"]["payload"]["severity"]]


def _markdown(msg: dict[str, Any]) -> str:
    return "\n".join(e["content"] for e in msg["card"]["body"]["elements"] if e["tag"] == "markdown")


def _sections(msg: dict[str, Any]) -> str:
    return "\n".join(b["text"]["text"] for b in msg["blocks"] if b["type"] == "section")


def test_the_seed_prune_names_the_pvcs_first_counts_every_kind_and_is_critical(rx: Receivers) -> None:
    msgs = send_all(rx, seed_prune(), "en")
    card = msgs["feishu"]["card"]
    assert card["header"]["template"] == "red"
    assert card["header"]["title"]["content"] == (
        "[CRITICAL] seed: 1638 would be pruned incl. PersistentVolumeClaim"
    )
    text = _markdown(msgs["feishu"])
    lines = [line for line in text.splitlines() if line.startswith("- **")]
    assert lines[0].startswith("- **86 PersistentVolumeClaim** (protected kind)")
    assert (
        "shop/persistentvolumeclaim-0000, shop/persistentvolumeclaim-0001" in lines[0]
        and "and 81 more" in lines[0]
    )
    assert lines[1].startswith("- **1140 Service**") and lines[2].startswith("- **412 Deployment**")
    assert "All 1638 change(s) are listed." in text  # every kind is there with its count
    assert (
        "(to be pruned: in the cluster, no longer in Git)**: do not sync with prune; check `argocd app diff seed`"
        in text
    )
    slack = _sections(msgs["slack"])
    assert slack.index("`PersistentVolumeClaim`") < slack.index("`Service`") < slack.index("`Deployment`")
    assert "*86* `PersistentVolumeClaim` *(protected kind)*" in slack
    pd = msgs["pagerduty"]["payload"]
    assert pd["severity"] == "critical"
    assert (
        pd["summary"] == "seed: 1638 would be pruned (86 PersistentVolumeClaim, 1140 Service, 412 Deployment)"
    )
    kinds = pd["custom_details"]["kinds"]
    assert [(k["kind"], k["count"], k["protected"]) for k in kinds] == [
        ("PersistentVolumeClaim", 86, True),
        ("Service", 1140, False),
        ("Deployment", 412, False),
    ]
    assert "big" not in json.dumps(pd["custom_details"])  # never whole objects


def test_a_prune_within_the_shrink_guard_count_of_unprotected_kinds_is_not_raised_to_critical() -> None:
    report = DriftReport(app(), gone("ConfigMap", 3, PRUNE_CANDIDATE))
    payload = OFFLINE["en"]["pagerduty"].payload(view(report), kind="alert")
    assert payload["payload"]["severity"] == "warning"
    report = DriftReport(app(), gone("ConfigMap", 11, PRUNE_CANDIDATE))  # > max-prune-count 10
    assert OFFLINE["en"]["pagerduty"].payload(view(report), kind="alert")["payload"]["severity"] == "critical"


def test_sixty_changes_are_cut_per_change_and_the_more_line_is_true(rx: Receivers) -> None:
    msgs = send_all(rx, sixty_changes(), "en")
    text = _markdown(msgs["feishu"])
    listed = [line for line in text.splitlines() if line.startswith("- **Deployment**")]
    assert 0 < len(listed) < 60
    assert all("a" * 79 + "…" in line and "a" * 81 not in line for line in listed)  # each value cut
    assert f"Not shown here: {60 - len(listed)} more field change(s)" in text
    # newest first: the 14:59 change leads, the title says which and how many more
    assert "containers[0].env[59].value" in listed[0].replace("&#91;", "[").replace("&#93;", "]")
    assert msgs["feishu"]["card"]["header"]["title"]["content"].endswith("(kubectl-edit) +59 more")
    slack = msgs["slack"]["blocks"]
    bullets = sum(b["text"]["text"].count("• ") for b in slack if b["type"] == "section")
    assert f"{60 - bullets} more field change(s)" in _sections(msgs["slack"])
    pd = msgs["pagerduty"]["payload"]["custom_details"]
    assert len(pd["changes"]) + pd["not_shown"]["fields"] == 60


def test_injection_strings_stay_text_in_every_channel(rx: Receivers) -> None:
    msgs = send_all(rx, injected(), "zh-CN")
    card = json.dumps(msgs["feishu"]["card"]["body"], ensure_ascii=False)
    assert "<at" not in card and "](" not in card and "https://evil.example" not in card
    assert (
        "&lt;at id=all&gt;&lt;/at&gt;" in card
        and "&#91;点我&#93;&#40;https:\u200b//evil.example&#41;" in card
    )
    assert "`rm" not in card and "*bold*" not in card
    for block in msgs["slack"]["blocks"]:
        if block["type"] != "section":
            continue
        for line in block["text"]["text"].split("\n"):
            outside = line.split("`")[0::2]  # the text between code spans
            for piece in outside:
                assert "<" not in piece and "evil" not in piece and "bold" not in piece, line
    slack = _sections(msgs["slack"])
    assert "`&lt;at id=all&gt;&lt;/at&gt;`" in slack and "`&lt;!channel&gt;" in slack
    assert "ˋrm -rfˋ *bold* _it_ ~strike~" in slack  # inside code: literal, and the span cannot be closed
    assert "<" not in msgs["slack"]["text"] and "{" not in msgs["slack"]["text"]


def test_a_253_character_app_name_keeps_every_limit_and_a_short_dedup_key(rx: Receivers) -> None:
    report = long_name()
    msgs = send_all(rx, report, "en")
    key = msgs["pagerduty"]["dedup_key"]
    assert len(key) == 255 and key.startswith("driftguard/argocd/aaaa")
    assert msgs["slack"]["blocks"][0]["text"]["text"].endswith("…")
    # a different long name sharing the first 220 characters gets a different key
    other = long_name()
    other.app = AppInfo(report.app.name[:-1] + "b")
    other_key = OFFLINE["en"]["pagerduty"].payload(view(other), kind="alert")["dedup_key"]
    assert other_key != key and len(other_key) == 255


def test_pagerduty_leads_with_the_newest_drift_on_the_same_open_incident(rx: Receivers) -> None:
    """PagerDuty appends a trigger on an open dedup_key to that alert's log: the newest entry must say what is new."""
    key = ResourceKey("apps", "Deployment", "ai", "deepseek-inference")
    gpu = Classified(
        key,
        FieldChange(
            "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu",
            "replace",
            "2",
            "4",
            (
                "spec",
                "template",
                "spec",
                "containers",
                ListSeg(0, (("name", "server"),), {}),
                "resources",
                "limits",
                "nvidia.com/gpu",
            ),
        ),
        HUMAN,
        Actor("kubectl-patch", "Update", "2026-11-29T14:02:07Z"),
    )
    image = Classified(
        key,
        FieldChange(
            "/spec/template/spec/containers/0/image",
            "replace",
            "r/ds:1.8.2",
            "r/ds:1.9.0",
            ("spec", "template", "spec", "containers", ListSeg(0, (("name", "server"),), {}), "image"),
        ),
        HUMAN,
        Actor("kubectl-set", "Update", "2026-11-29T15:30:00Z"),
    )
    ch = channels(rx, "en")["pagerduty"]
    sender = HttpSender()
    first = DriftReport(app("deepseek-inference"), [ResourceDrift(key, "modified", [gpu])])
    later = DriftReport(app("deepseek-inference"), [ResourceDrift(key, "modified", [gpu, image])])
    sender.send(ch, ch.payload(view(first), kind="alert"))
    sender.send(ch, ch.payload(view(later), kind="alert"))
    a, b = (c.json() for c in rx.on("/pagerduty"))
    assert a["dedup_key"] == b["dedup_key"]  # one incident per drift episode, resolved with the same key
    [alert] = rx.pagerduty_alerts()  # as PagerDuty keeps it: one open alert, the second trigger in its log
    assert alert["status"] == "triggered" and alert["summary"] == a["payload"]["summary"]
    assert alert["log"][-1] == b["payload"]["summary"]  # the newest entry names the newest drift
    sender.send(ch, ch.payload(view(later, kind="resolve"), kind="resolve"))
    sender.send(ch, ch.payload(view(later), kind="alert"))  # drift again after the resolve
    first_alert, second_alert = rx.pagerduty_alerts()
    assert first_alert["status"] == "resolved" and second_alert["status"] == "triggered"
    assert second_alert["summary"] == b["payload"]["summary"]  # a new incident titled with the newest drift
    assert a["payload"]["summary"] == "deepseek-inference: GPU limit 2 -> 4 (kubectl-patch)"
    assert (
        b["payload"]["summary"] == "deepseek-inference: image r/ds:1.8.2 -> r/ds:1.9.0 (kubectl-set) +1 more"
    )
    assert b["payload"]["custom_details"]["newest_at"] == "2026-11-29 15:30 UTC"
    assert b["payload"]["custom_details"]["changes"][0]["readable"] == "containers[server].image"
    assert a["payload"]["custom_details"]["changes"][0]["readable"] == (
        'containers[server].resources.limits["nvidia.com/gpu"]'
    )


def test_times_follow_the_configured_zone_with_the_age() -> None:
    raw = {"timeZone": "Asia/Shanghai", "channels": {"f": {"type": "feishu", "url": "https://x.example"}}}
    ch = build_channels(parse_config(raw), TEMPLATES)["f"]
    key = ResourceKey("apps", "Deployment", "shop", "api")
    c = Classified(
        key,
        FieldChange("/spec/replicas", "replace", 1, 2),
        HUMAN,
        Actor("kubectl-scale", "Update", "2026-11-29T14:02:07Z"),
    )
    from datetime import UTC, datetime

    payload = ch.payload(
        view(DriftReport(app(), [ResourceDrift(key, "modified", [c])])),
        kind="alert",
        now=datetime(2026, 11, 29, 14, 5, 30, tzinfo=UTC),
    )
    # issue 30: never "CST" (it also reads as US Central): 北京时间 in Chinese, UTC+8 in English
    assert "北京时间 2026-11-29 22:02（3 分钟前）" in _markdown(payload)
    assert "CST" not in json.dumps(payload, ensure_ascii=False)
    en = build_channels(parse_config({**raw, "locale": "en"}), TEMPLATES)["f"]
    text = json.dumps(
        en.payload(
            view(DriftReport(app(), [ResourceDrift(key, "modified", [c])])),
            kind="alert",
            now=datetime(2026, 11, 29, 14, 5, 30, tzinfo=UTC),
        ),
        ensure_ascii=False,
    )
    assert "2026-11-29 22:02 UTC+8" in text and "CST" not in text


def _plain(msg: dict[str, Any]) -> str:
    return str(msg["payload"]["custom_details"]["cause"]["text"])


def test_a_refused_render_is_named_as_the_cause_below_the_prune_summary_in_every_channel(
    rx: Receivers,
) -> None:
    en = send_all(rx, refused_prune(), "en")
    text = _markdown(en["feishu"])
    assert (
        "**Cause**: render refused by driftguard (shrink guard): the render would prune 1638 of 1638 resources"
        " the Application manages &#40;1638 &gt; max-prune-count 10&#41;; gating key **enabled** relies on the"
        " chart default (templates/deployment.yaml:1). Argo CD syncs and prunes nothing until the render"
        " passes" in text
    )
    # near the prune summary: after the kinds (and the "more" line), before what to do
    assert text.index("**412 Deployment**") < text.index("**Cause**") < text.index("**What to do")
    slack = _sections(en["slack"])
    assert (
        "*Cause*: render refused by driftguard (`shrink` guard): `the render would prune 1638 of 1638"
        " resources the Application manages (1638 &gt; max-prune-count 10)`; gating key `enabled` relies on"
        " the chart default (`templates/deployment.yaml:1`)." in slack
    )
    assert slack.index("`Deployment`") < slack.index("*Cause*") < slack.index("*What to do")
    pd = en["pagerduty"]["payload"]
    assert pd["summary"].endswith("; render refused by driftguard (shrink)")
    cause = pd["custom_details"]["cause"]
    assert (cause["kind"], cause["guard"]) == ("render-refused", "shrink")
    assert cause["gating"] == [
        {"key": "enabled", "origin": "chart-default", "where": "templates/deployment.yaml:1"}
    ]
    assert _plain(en["pagerduty"]).startswith(
        "render refused by driftguard (shrink guard): the render would prune 1638 of 1638 resources"
    )
    assert "gating key `enabled` relies on the chart default (templates/deployment.yaml:1)" in _plain(
        en["pagerduty"]
    )
    rx.captured.clear()
    zh = send_all(rx, refused_prune(), "zh-CN")
    assert (
        "**原因**：driftguard 拒绝了本次渲染（shrink 检查未通过）：" in _markdown(zh["feishu"])
        and "；values 键 **enabled** 本环境没有设置，沿用了 chart 默认值（templates/deployment.yaml:1）。"
        "在渲染通过之前，Argo CD 不会同步，也不会清理任何资源"
        in _markdown(zh["feishu"])
    )
    assert "；values 键 `enabled` 本环境没有设置，沿用了 chart 默认值（`templates/deployment.yaml:1`）" in (
        _sections(zh["slack"])
    )
    assert zh["pagerduty"]["payload"]["summary"].endswith("；driftguard 拒绝了渲染（shrink）")
    assert _plain(zh["pagerduty"]).startswith("driftguard 拒绝了本次渲染（shrink 检查未通过）：")


def test_another_manifest_failure_is_the_cause_too_and_no_cause_says_nothing() -> None:
    report = seed_prune()
    report.cause = Cause(FAILED, "helm template: chart requires kubeVersion >=1.33")
    v = view(report, link=LINK + "seed")
    text = _markdown(OFFLINE["en"]["feishu"].payload(v, kind="alert"))
    assert "**Cause**: Argo CD could not generate the manifests: helm template: chart requires" in text
    slack = _sections(OFFLINE["zh-CN"]["slack"].payload(v, kind="alert"))
    assert "*原因*：Argo CD 无法生成清单：`helm template: chart requires kubeVersion &gt;=1.33`" in slack
    pd = OFFLINE["en"]["pagerduty"].payload(v, kind="alert")["payload"]
    assert pd["summary"].endswith("; manifest generation failed")
    plain = view(seed_prune(), link=LINK + "seed")
    assert "Cause" not in _markdown(OFFLINE["en"]["feishu"].payload(plain, kind="alert"))
    assert "Cause" not in _sections(OFFLINE["en"]["slack"].payload(plain, kind="alert"))
    assert (
        OFFLINE["en"]["pagerduty"].payload(plain, kind="alert")["payload"]["custom_details"]["cause"] is None
    )


def test_injection_strings_in_the_cause_stay_text_in_every_channel(rx: Receivers) -> None:
    """A tenant writes the chart and the values: the guard's reason, key and template name are theirs."""
    report = seed_prune()
    report.cause = refusal(
        " ".join(INJECTION),
        GatingKey(INJECTION[0] + INJECTION[1], CHART_DEFAULT, INJECTION[3]),
        GatingKey(INJECTION[2], VALUE, "templates/x.yaml:2"),
    )
    assert len(report.cause.keys) == 2
    for locale in ("zh-CN", "en"):
        rx.captured.clear()
        msgs = send_all(rx, report, locale)
        card = json.dumps(msgs["feishu"]["card"]["body"], ensure_ascii=False)
        assert "<at" not in card and "](" not in card and "https://evil.example" not in card
        assert "&lt;at id=all&gt;&lt;/at&gt;&#91;点我&#93;&#40;https:\u200b//evil.example&#41;" in card
        assert "`rm" not in card and "*bold*" not in card and "<!channel>" not in card
        for block in msgs["slack"]["blocks"]:
            if block["type"] != "section":
                continue
            for line in block["text"]["text"].split("\n"):
                assert line.count("`") % 2 == 0, line
                for piece in line.split("`")[0::2]:  # outside code spans
                    assert "<" not in piece and "evil" not in piece and "bold" not in piece, line
        assert "`&lt;!channel&gt; &lt;https:\u200b//evil.example|click&gt; &amp;amp;`" in _sections(
            msgs["slack"]
        )
        assert "<" not in msgs["slack"]["text"]
        pd = msgs["pagerduty"]["payload"]
        assert "<at id=all></at>" in _plain(msgs["pagerduty"])  # plain text: PagerDuty renders no markup
        assert len(pd["summary"]) <= 1024


def test_a_button_opens_the_first_resource_listed_in_the_argo_cd_ui(rx: Receivers) -> None:
    """ui/src/app/applications/components/application-details/application-details.tsx: ?node=<nodeKey>/<container>."""
    msgs = send_all(rx, seed_prune(), "en")
    pvc = LINK + "seed?node=/PersistentVolumeClaim/shop/persistentvolumeclaim-0000/0"  # the core group is ""
    app_button, resource = msgs["feishu"]["card"]["body"]["elements"][-2:]
    assert app_button["behaviors"][0]["default_url"] == LINK + "seed"
    assert resource["behaviors"][0]["default_url"] == pvc
    assert resource["text"]["content"] == "Open PersistentVolumeClaim shop/persistentvolumeclaim-0000"
    [actions] = [b for b in msgs["slack"]["blocks"] if b["type"] == "actions"]
    assert [e["url"] for e in actions["elements"]] == [LINK + "seed", pvc]
    assert msgs["pagerduty"]["links"][1] == {
        "href": pvc,
        "text": "Argo CD: PersistentVolumeClaim shop/persistentvolumeclaim-0000",
    }
    assert msgs["pagerduty"]["client_url"] == LINK + "seed"
    # field changes only: the newest change's resource; cluster text is percent-encoded, never raw
    key = ResourceKey("example.com", "Widget", "shop", "a&b=c#d")
    odd = DriftReport(
        app(),
        [ResourceDrift(key, "modified", [Classified(key, FieldChange("/spec/x", "replace", 1, 2), HUMAN)])],
    )
    payload = OFFLINE["zh-CN"]["feishu"].payload(view(odd, link=LINK + "shop"), kind="alert")
    resource = payload["card"]["body"]["elements"][-1]
    assert (
        resource["behaviors"][0]["default_url"] == LINK + "shop?node=example.com/Widget/shop/a%26b%3Dc%23d/0"
    )
    assert resource["text"]["content"] == "查看 Widget shop/a&b=c#d"
    # no Argo CD URL configured: no buttons at all
    bare = OFFLINE["en"]["slack"].payload(view(odd), kind="alert")
    assert not [b for b in bare["blocks"] if b["type"] == "actions"]


def test_the_actor_line_reads_as_chinese_in_zh_cn_and_stays_english_in_en() -> None:
    from datetime import UTC, datetime

    key = ResourceKey("apps", "Deployment", "ai", "deepseek-inference")
    person = Actor("kubectl-patch", "Update", "2026-11-29T14:02:07Z", user="alice@example.com", matched=True)
    nobody = Actor("kubectl-edit", "Update", "2026-11-29T13:02:07Z", matched=False)
    changes = [
        Classified(key, FieldChange("/spec/replicas", "replace", 2, 4), HUMAN, person),
        Classified(key, FieldChange("/spec/paused", "replace", False, True), HUMAN, nobody),
    ]
    v = view(DriftReport(app("deepseek-inference"), [ResourceDrift(key, "modified", changes)]))
    now = datetime(2026, 11, 29, 14, 5, 7, tzinfo=UTC)
    zh = OFFLINE["zh-CN"]["pagerduty"].payload(v, kind="alert", now=now)["payload"]["custom_details"]
    assert zh["actor"] == "由 alice@example.com 通过 kubectl-patch 修改，14:02:07（3 分钟前）"
    en = OFFLINE["en"]["pagerduty"].payload(v, kind="alert", now=now)["payload"]["custom_details"]
    assert en["actor"] == "alice@example.com via kubectl-patch, 14:02:07 (3 min ago)"
    card = _markdown(OFFLINE["zh-CN"]["feishu"].payload(v, kind="alert", now=now))
    assert "· 由 alice@example.com 通过 kubectl-patch 修改 · 2026-11-29 14:02 UTC（3 分钟前）" in card
    assert "· 通过 kubectl-edit 修改（未匹配到身份记录） · 2026-11-29 13:02 UTC（1 小时前）" in card
    slack = _sections(OFFLINE["zh-CN"]["slack"].payload(v, kind="alert", now=now))
    assert "· 由 `alice@example.com` 通过 `kubectl-patch` 修改 ·" in slack
    assert "· 通过 `kubectl-edit` 修改（未匹配到身份记录）" in slack and "`-`" not in slack
    # only the field manager known: the field-manager-only form
    only = view(DriftReport(app(), [ResourceDrift(key, "modified", changes[1:])]))
    zh_only = OFFLINE["zh-CN"]["pagerduty"].payload(only, kind="alert", now=now)["payload"]["custom_details"]
    assert zh_only["actor"] == "通过 kubectl-edit 修改，13:02:07（1 小时前）；未匹配到身份记录"


# --- the property test: every size and shape, every channel and locale --------------------------

KINDS = ("Deployment", "Service", "ConfigMap", "PersistentVolumeClaim", "Namespace", "StatefulSet", "Widget")
specials = st.sampled_from(
    ["`", "*", "_", "~", "<", ">", "&", "[", "](", "\n", "<at id=all>", "é", "配置", "\\", "|"]
)
texts = st.lists(specials | st.text(max_size=30), max_size=40).map("".join)
values = st.none() | st.integers() | texts | st.dictionaries(st.text(max_size=5), texts, max_size=3)
names = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,250}[a-z0-9])?", fullmatch=True)


@st.composite
def reports(draw: Any) -> DriftReport:
    drifts = []
    for kind in draw(st.lists(st.sampled_from(KINDS), max_size=5, unique=True)):
        cls = draw(st.sampled_from([PRUNE_CANDIDATE, MISSING]))
        drifts += gone(kind, draw(st.integers(0, 150)), cls)
    for _ in range(draw(st.integers(0, 4))):
        key = ResourceKey(
            "apps", draw(st.sampled_from(KINDS)), draw(st.sampled_from(["", "shop"])), draw(names)
        )
        changes = [
            Classified(
                key,
                FieldChange(
                    draw(st.sampled_from(["/spec/replicas", "/data/" + draw(texts)])),
                    "replace",
                    draw(values),
                    draw(values),
                ),
                HUMAN,
                draw(
                    st.none()
                    | st.builds(
                        Actor,
                        manager=texts,
                        operation=st.just("Update"),
                        time=st.none() | st.just("2026-11-29T14:02:07Z"),
                    )
                ),
            )
            for _ in range(draw(st.integers(1, 40)))
        ]
        drifts.append(ResourceDrift(key, "modified", changes))
    cause = draw(
        st.none()
        | st.builds(
            lambda reason, keys: refusal(reason or "r", *keys),
            texts,
            st.lists(st.builds(GatingKey, texts, st.sampled_from([CHART_DEFAULT, VALUE]), texts), max_size=5),
        )
        | st.builds(lambda reason: Cause(FAILED, reason), texts)
    )
    return DriftReport(app(draw(names)), drifts, cause)


def _truth(d_report: DriftReport, text: str, item: re.Pattern[str], group: re.Pattern[str]) -> None:
    """The listed kinds and changes plus what the "more" line counts are exactly the report's."""
    alerting = d_report.alerting
    kinds = {(c.cls, c.resource.kind) for c in alerting if c.cls in (MISSING, PRUNE_CANDIDATE)}
    fields = [c for c in alerting if c.cls == HUMAN]
    listed_groups = len(group.findall(text))
    listed_fields = len(item.findall(text))
    if "change(s) are listed." in text:
        assert (listed_groups, listed_fields) == (len(kinds), len(fields))
        return
    more_kinds = re.search(r"(\d+) more kind\(s\)", text)
    more_fields = re.search(r"(\d+) more field change\(s\)", text)
    assert listed_groups + (int(more_kinds.group(1)) if more_kinds else 0) == len(kinds)
    assert listed_fields + (int(more_fields.group(1)) if more_fields else 0) == len(fields)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(reports())
def test_every_report_fits_every_channel_and_the_more_line_is_true(report: DriftReport) -> None:
    v = view(report, link=LINK + report.app.name)
    for locale, chs in OFFLINE.items():
        for name, ch in chs.items():
            payload = ch.payload(v, kind="alert")
            body = ch.prepare(payload).body  # signing fields included
            msg = check_limits(name, body, report)
            cause = report.cause is not None and bool(report.cause.reason or report.cause.guard)
            if name == "feishu":
                assert ("**Cause**" in _markdown(msg) or "**原因**" in _markdown(msg)) == cause
            elif name == "slack":
                assert ("*Cause*" in _sections(msg) or "*原因*" in _sections(msg)) == cause
            else:
                assert (msg["payload"]["custom_details"]["cause"] is not None) == cause
            if locale != "en":
                continue
            if name == "feishu":
                _truth(
                    report,
                    _markdown(msg),
                    re.compile(r"^- \*\*(?!\d+ )", re.M),
                    re.compile(r"^- \*\*\d+ ", re.M),
                )
            elif name == "slack":
                _truth(report, _sections(msg), re.compile(r"^• `", re.M), re.compile(r"^• \*\d+\* ", re.M))
            else:
                details = msg["payload"]["custom_details"]
                _truth_pd(report, details)


def _truth_pd(report: DriftReport, details: dict[str, Any]) -> None:
    gone_total = sum(1 for c in report.alerting if c.cls in (MISSING, PRUNE_CANDIDATE))
    fields = sum(1 for c in report.alerting if c.cls == HUMAN)
    assert sum(k["count"] for k in details["kinds"]) + details["not_shown"]["resources"] == gone_total
    assert len(details["changes"]) + details["not_shown"]["fields"] == fields


@pytest.mark.parametrize("event", ["sync-failed", "render-refused", "prune-pending"])
def test_a_notice_with_a_huge_hostile_message_fits_and_stays_text(event: str) -> None:
    from notifier.render import notice_view

    hostile = " ".join(INJECTION) + "\n" + "x" * 200_000
    v = notice_view(
        app(),
        event=event,
        message=hostile,
        lines=[hostile] * 500,
        counts={"<at id=all></at>": 3, "Deployment": 412},
        link=LINK + "shop",
    )
    for chs in OFFLINE.values():
        for name, ch in chs.items():
            msg = check_limits(name, ch.prepare(ch.payload(v, kind="notice")).body)
            if name == "feishu":
                assert "<at" not in _markdown(msg)
            if name == "slack":
                assert "<at" not in _sections(msg)


def test_the_render_refused_notice_quotes_the_gating_key_past_the_first_lines() -> None:
    from notifier.alerts.notices import notice_for
    from standins.argo_api import application

    stderr = "\n".join(
        [
            refusal_headline("shrink", "the render would prune 12 of 12 resources the Application manages"),
            *[
                f"  Deployment.apps shop/api-{i}  <- hidden by the chart default of enabled"
                for i in range(12)
            ],
            gating_line(GatingKey("enabled", CHART_DEFAULT, "templates/deployment.yaml:1")),
            "fix: annotate the Application",
        ]
    )
    refused = application("shop", sync="Unknown")
    refused["status"]["conditions"] = [
        {"type": "ComparisonError", "message": "Failed to load target state: " + stderr}
    ]
    n = notice_for("on-render-refused", refused, app(), body={}, link=LINK + "shop")
    assert "gating key" not in n["message"]  # past the first lines Argo CD's message is cut
    assert n["lines"] == [
        "driftguard: gating key `enabled` relies on the chart default (templates/deployment.yaml:1)"
    ]
    for name, ch in OFFLINE["zh-CN"].items():
        msg = check_limits(name, ch.prepare(ch.payload(n, kind="notice")).body)
        text = json.dumps(msg, ensure_ascii=False)
        assert "enabled" in text and "relies on the chart default" in text, name


def test_zh_cn_reads_as_a_chinese_sre_writes() -> None:
    """Issue 30: the Kubernetes zh-cn docs' terms (限制/请求, 字段路径), no 告警 as a severity name inside
    messages that are all 告警, 项/个 for resources, full-width punctuation, no "CST"."""
    from notifier.render import sample_views

    texts = []
    for name in ("feishu", "slack", "pagerduty"):
        raw = {"locale": "zh-CN", "timeZone": "Asia/Shanghai", "channels": {"c": _channel_cfg(name)}}
        ch = build_channels(parse_config(raw), TEMPLATES)["c"]
        for v in sample_views():
            kind = (
                v["kind"]
                if v["kind"] in ("notice", "fallback")
                else ("resolve" if not v.get("resources") else "alert")
            )
            texts.append(json.dumps(ch.payload(v, kind=kind), ensure_ascii=False))
    every = "\n".join(texts)
    for wrong in ("上限", "申请量", "字段指针", "带清理", "告警｜", "CST", "处资源"):
        assert wrong not in every, wrong
    assert "字段路径" in every
    assert not re.search(r"[\u4e00-\u9fff]: ", every)  # no ASCII colon after Chinese text
    assert "sample-app: " not in every  # the title's own colon is full-width too (PagerDuty's summary)


def _channel_cfg(name: str) -> dict[str, Any]:
    return {
        "feishu": {"type": "feishu", "url": "https://open.feishu.example.com/hook"},
        "slack": {"type": "slack", "url": "https://hooks.slack.example.com/x", "locale": "zh-CN"},
        "pagerduty": {
            "type": "pagerduty",
            "routing_key": "0123456789abcdef0123456789abcdef",
            "locale": "zh-CN",
        },
    }[name]

"""The reference drill end to end: one alert per channel, the GPU change and its actor, nothing else."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

from flask import Flask

from notifier.app import create_app
from notifier.channels.feishu import sign
from standins.argo_api import FakeArgo
from standins.receivers import Receivers

from .conftest import TOKEN, drill_app, make_config, make_settings, notification, post

GPU = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"


def deliver(app: Flask, body: dict[str, Any]) -> str:
    client = app.test_client()
    resp = post(client, body)
    assert resp.status_code == 202, resp.get_json()
    app.extensions["driftguard"].worker.drain()
    return str(resp.get_json()["id"])


def everything(rx: Receivers) -> str:
    return "\n".join(c.body.decode() for c in rx.captured)


def test_one_alert_per_channel_naming_the_gpu_change_and_the_actor(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    drill_app(argo)
    deliver(app, notification())
    feishu, slack, pd = rx.on("/feishu"), rx.on("/slack"), rx.on("/pagerduty")
    assert (len(feishu), len(slack), len(pd)) == (1, 1, 1)

    card = feishu[0].json()
    assert card["msg_type"] == "interactive" and card["card"]["schema"] == "2.0"
    assert card["card"]["header"]["template"] == "orange"  # human drift: error
    title = card["card"]["header"]["title"]["content"]
    assert title.startswith("重要｜deepseek-inference：GPU 限制 2 → 4（通过 kubectl-patch）"), title
    lines = "\n".join(
        e["content"] for e in card["card"]["body"]["elements"] if e["tag"] == "markdown"
    ).splitlines()
    gpu_line = next(line for line in lines if "nvidia.com/gpu" in line)
    # a readable path (the container by name), the field manager labelled as one, the time with its
    # age; identity is not configured here (no audit token), so no identity wording at all (issue 30)
    assert gpu_line.startswith(
        '- **Deployment** ai-serving/deepseek-inference · containers&#91;server&#93;.resources.limits&#91;"nvidia.com/gpu"&#93;：2 → **4** · 通过 kubectl-patch 修改'
        + " · 2026-11-29 14:02 UTC（"
    ), gpu_line
    assert "身份记录" not in "\n".join(lines)
    assert "操作者" not in "\n".join(lines)
    assert any(line.startswith("**处理建议（手动改动）**：") for line in lines)
    button, resource = card["card"]["body"]["elements"][-2:]
    assert (
        button["behaviors"][0]["default_url"]
        == "https://argocd.example.com/applications/argocd/deepseek-inference"
    )
    assert resource["behaviors"][0]["default_url"] == (
        "https://argocd.example.com/applications/argocd/deepseek-inference"
        "?node=apps/Deployment/ai-serving/deepseek-inference/0"
    )
    # signed: timestamp + "\n" + secret as the HMAC key over an empty message
    assert card["sign"] == sign(int(card["timestamp"]), "feishu-signing-secret")

    message = slack[0].json()
    assert "deepseek-inference" in message["text"] and "kubectl-patch" in message["text"]
    assert "{" not in message["text"]  # the phone's fallback: words, no JSON
    assert message["blocks"][0]["type"] == "header"
    assert "GPU" in message["blocks"][0]["text"]["text"]

    event = pd[0].json()
    assert (
        event["event_action"] == "trigger"
        and event["dedup_key"] == "driftguard/argocd/deepseek-inference/drift"
    )
    assert event["payload"]["severity"] == "error"
    assert "GPU limit 2 -> 4 (kubectl-patch)" in event["payload"]["summary"]
    changes = event["payload"]["custom_details"]["changes"]
    gpu = next(c for c in changes if c["path"] == GPU)
    assert (gpu["old"], gpu["new"], gpu["field_manager"]) == ("2", "4", "kubectl-patch")
    assert gpu["readable"] == 'containers[server].resources.limits["nvidia.com/gpu"]'


def test_nothing_about_replicas_defaults_or_secret_values(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    drill_app(argo)
    deliver(app, notification())
    sent = everything(rx)
    assert (
        "/spec/replicas" not in sent and "imagePullPolicy" not in sent and "revisionHistoryLimit" not in sent
    )
    for planted in ("rotated-PLANTED-secret", "db-PLANTED-password"):
        assert planted not in sent
        assert base64.b64encode(planted.encode()).decode() not in sent
    pd = rx.on("/pagerduty")[0].json()
    secret = next(c for c in pd["payload"]["custom_details"]["changes"] if c["resource"]["kind"] == "Secret")
    assert (
        secret["new"].startswith("***(sha256:") and secret["old"] != secret["new"]
    )  # it changed; the value stays hidden
    suppressed = pd["payload"]["custom_details"]["suppressed"]
    assert suppressed["controller"] >= 1 and suppressed["admission-default"] >= 1


def test_the_same_drift_again_is_not_sent_twice_but_new_drift_is(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    drill_app(argo)
    deliver(app, notification())
    deliver(app, notification())  # Argo CD retried, or the same drift was notified again
    assert len(rx.on("/feishu")) == 1 and len(rx.on("/pagerduty")) == 1
    drill_app(argo, secret_changed=False)  # different drift: only the GPU change now
    deliver(app, notification())
    assert len(rx.on("/feishu")) == 2 and len(rx.on("/slack")) == 2 and len(rx.on("/pagerduty")) == 2
    metrics = (
        app.test_client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).get_data(as_text=True)
    )
    assert 'driftguard_notifier_deduplicated_total{channel="feishu"} 1' in metrics
    # what was seen, by class: the person's edits and what the HPA and the API server wrote
    seen = dict(re.findall(r'driftguard_notifier_drift_changes_total\{class="([a-z-]+)"\} (\S+)', metrics))
    assert (
        float(seen["human"]) >= 2 and float(seen["controller"]) >= 2 and float(seen["admission-default"]) >= 3
    )


def test_back_in_sync_resolves_the_same_pagerduty_incident(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    drill_app(argo)
    deliver(app, notification())
    drill_app(argo, patched=False, secret_changed=False, sync="Synced")  # self-heal put Git back
    deliver(app, notification(trigger="on-sync-succeeded"))
    trigger, resolve = [c.json() for c in rx.on("/pagerduty")]
    assert resolve == {
        "routing_key": trigger["routing_key"],
        "event_action": "resolve",
        "dedup_key": trigger["dedup_key"],
    }
    assert "已恢复" in json.dumps(rx.on("/feishu")[-1].json(), ensure_ascii=False)
    resolved = rx.on("/slack")[-1].json()
    assert resolved["text"] == "Resolved: deepseek-inference matches Git"
    assert resolved["blocks"][0]["text"]["text"].startswith(
        ":white_check_mark: `deepseek-inference` matches Git"
    )
    # drift again after the resolve alerts again at once (the dedup memory went with the incident)
    drill_app(argo)
    deliver(app, notification())
    assert len(rx.on("/pagerduty")) == 3 and rx.on("/pagerduty")[-1].json()["event_action"] == "trigger"


def test_quiet_when_only_suppressed_changes(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    drill_app(argo, patched=False, secret_changed=False)
    deliver(app, notification())
    assert rx.captured == []


def test_unknown_app_is_recorded_and_dropped_cleanly(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    deliver(app, notification(name="no-such-app"))
    assert rx.captured == []
    metrics = (
        app.test_client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).get_data(as_text=True)
    )
    assert 'driftguard_notifier_expanded_total{outcome="app-not-found"} 1' in metrics


def test_two_replicas_seeing_the_sync_resolve_once_and_share_the_dedup_memory(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, outbox_url: str
) -> None:
    replicas = [
        create_app(make_settings(tmp_path, argo.url, outbox_url), config=make_config(rx)) for _ in range(2)
    ]
    try:
        drill_app(argo)
        deliver(replicas[0], notification())
        deliver(replicas[1], notification())  # the same drift at the other replica: remembered there too
        assert len(rx.on("/pagerduty")) == 1 and len(rx.on("/slack")) == 1
        drill_app(argo, patched=False, secret_changed=False, sync="Synced")
        # both of Argo CD's triggers for the sync, each taken by a different replica
        for app, trigger in zip(replicas, ("on-sync-succeeded", "on-drift-resolved"), strict=True):
            post(app.test_client(), notification(trigger=trigger))
        for app in replicas:
            app.extensions["driftguard"].worker.drain()
        actions = [c.json()["event_action"] for c in rx.on("/pagerduty")]
        assert actions == ["trigger", "resolve"]
        assert len(rx.on("/slack")) == 2 and len(rx.on("/feishu")) == 2  # one "resolved" each
    finally:
        for app in replicas:
            app.extensions["driftguard"].worker.stop()
            app.extensions["driftguard"].outbox.close()

"""Issue 30: the drift self-heal reverts before the notifier reads is alerted, not lost.

The Argo CD stand-in has already healed when the notifier reads (the first self-heal has no backoff,
argo-cd v3.5.1 controller/appcontroller.go), and the webhook body is what the shipped template
renders from the Application at the moment the trigger held (OutOfSync).
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from flask import Flask

from standins.apiserver import admission_review
from standins.argo_api import FakeArgo, application
from standins.drill import inference_live, secret_live
from standins.receivers import Receivers
from tests.notifier.test_webhook import _shipped_body

from .conftest import AUDIT_TOKEN, drill_app, post

REVISION = "0123456789abcdef0123456789abcdef01234567"
DEPLOYMENT = {
    "group": "apps",
    "version": "v1",
    "kind": "Deployment",
    "namespace": "ai-serving",
    "name": "deepseek-inference",
}
LAST_SYNC = {
    "phase": "Succeeded",
    "message": "successfully synced (all tasks run)",
    "startedAt": "2026-11-29T13:54:50Z",
    "finishedAt": "2026-11-29T13:55:00Z",
    "operation": {"sync": {"revision": REVISION}, "initiatedBy": {"automated": True}},
    "syncResult": {
        "revision": REVISION,
        "resources": [{**DEPLOYMENT, "status": "Synced", "message": "unchanged"}],
    },
}
SELF_HEAL = {
    "phase": "Succeeded",
    "message": "successfully synced (all tasks run)",
    "startedAt": "2026-11-29T14:02:08Z",
    "finishedAt": "2026-11-29T14:02:09Z",
    "operation": {
        "sync": {"revision": REVISION, "selfHealAttemptsCount": 1},
        "initiatedBy": {"automated": True},
    },
    "syncResult": {
        "revision": REVISION,
        "resources": [
            {**DEPLOYMENT, "status": "Synced", "message": "deployment.apps/deepseek-inference configured"}
        ],
    },
}


def detected_body() -> dict[str, Any]:
    """What notifications-engine posted when the app turned OutOfSync (before self-heal ran)."""
    app = application(
        "deepseek-inference",
        resources=[
            ("apps", "Deployment", "ai-serving", "deepseek-inference"),
            ("", "Secret", "ai-serving", "inference-db"),
        ],
        sync="OutOfSync",
        dest_namespace="ai-serving",
    )
    app["status"]["resources"][1]["status"] = "Synced"
    app["status"]["operationState"] = copy.deepcopy(LAST_SYNC)
    app["metadata"]["resourceVersion"] = "918300"
    return _shipped_body("on-drift-detected", app)


def healed(argo: FakeArgo) -> None:
    """The stand-in as the notifier reads it: Synced, the self-heal operation done."""
    drill_app(argo, patched=False, secret_changed=False, sync="Synced")
    app = argo.apps[("argocd", "deepseek-inference")]
    app["status"]["operationState"] = copy.deepcopy(SELF_HEAL)


def tracked(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("labels", {})["app.kubernetes.io/instance"] = "deepseek-inference"
    return out


def admit(client: Any, review: dict[str, Any]) -> None:
    answer = client.post(
        "/v1/admission", data=json.dumps(review), headers={"Authorization": f"Bearer {AUDIT_TOKEN}"}
    )
    assert answer.status_code == 200 and answer.get_json()["response"]["allowed"] is True


def texts(rx: Receivers) -> dict[str, str]:
    return {p: "\n".join(c.body.decode() for c in rx.on(p)) for p in ("/feishu", "/slack", "/pagerduty")}


def test_a_patch_self_heal_reverted_before_the_read_is_alerted_with_path_values_and_who(
    idapp: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    client = idapp.test_client()
    before, after = tracked(inference_live(patched=False, gpu="2")), tracked(inference_live(gpu="4"))
    admit(client, admission_review(after, old=before))  # alice's kubectl patch: 2 GPUs -> 4
    # Argo CD's own write (the self-heal putting 2 back) is no person's change: not kept
    admit(
        client,
        admission_review(
            before,
            old=after,
            user="system:serviceaccount:argocd:argocd-application-controller",
            field_manager="argocd-controller",
        ),
    )
    idapp.extensions["driftguard"].recorder.flush()
    healed(argo)
    assert post(client, detected_body()).status_code == 202
    idapp.extensions["driftguard"].worker.drain()
    got = texts(rx)
    assert [len(rx.on(p)) for p in ("/feishu", "/slack", "/pagerduty")] == [1, 1, 1]
    slack = json.loads(rx.on("/slack")[0].body)
    assert "reverted by self-heal at 14:02:09 UTC" in slack["blocks"][0]["text"]["text"]
    sections = "\n".join(b["text"]["text"] for b in slack["blocks"] if b["type"] == "section")
    assert '`containers[server].resources.limits["nvidia.com/gpu"]`: `2` → `4`' in sections
    assert "alice@example.com" in got["/slack"] and "kubectl-patch" in got["/slack"]
    assert "already reverted" in got["/slack"]
    card = json.loads(rx.on("/feishu")[0].body)["card"]
    assert "已于 14:02:09 UTC 被 self-heal 自动恢复" in card["header"]["title"]["content"]
    assert "alice@example.com" in got["/feishu"]
    pd = rx.on("/pagerduty")[0].json()
    assert pd["event_action"] == "trigger" and pd["dedup_key"].endswith("/drift")
    assert "reverted by self-heal at 14:02:09 UTC" in pd["payload"]["summary"]
    # the resolve Argo CD sends next (Synced) resolves PagerDuty's drift incident; chat hears no "resolved"
    synced = _shipped_body("on-drift-resolved", argo.apps[("argocd", "deepseek-inference")])
    assert post(client, synced).status_code == 202
    idapp.extensions["driftguard"].worker.drain()
    assert [len(rx.on(p)) for p in ("/feishu", "/slack")] == [1, 1]
    assert rx.on("/pagerduty")[-1].json() == {
        **{"routing_key": pd["routing_key"]},
        "event_action": "resolve",
        "dedup_key": pd["dedup_key"],
    }


def test_without_admission_the_resources_are_named_and_the_alert_says_how_to_capture_the_diff(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    healed(argo)
    client = app.test_client()
    assert post(client, detected_body()).status_code == 202
    app.extensions["driftguard"].worker.drain()
    got = texts(rx)
    assert [len(rx.on(p)) for p in ("/feishu", "/slack", "/pagerduty")] == [1, 1, 1]
    assert "Drift reverted by self-heal" in got["/slack"] and "14:02:09 UTC" in got["/slack"]
    assert "Deployment ai-serving/deepseek-inference" in got["/slack"]
    assert "field diff was not captured" in got["/slack"] and "identity-admission" in got["/slack"]
    assert "Secret" not in got["/slack"]  # the body named it Synced: not part of what was reverted
    assert "手动改动已被 self-heal 恢复" in got["/feishu"] and "未采集到字段级差异" in got["/feishu"]
    assert "身份记录" not in got["/feishu"]  # identity is not configured: no identity wording
    slack = json.loads(rx.on("/slack")[0].body)
    assert any(b["type"] == "actions" for b in slack["blocks"])  # links to Argo CD


def test_a_deploy_of_new_git_is_no_revert(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    """The body said OutOfSync because Git moved; automated sync deployed it: nothing to alert."""
    healed(argo)
    op = argo.apps[("argocd", "deepseek-inference")]["status"]["operationState"]
    op["operation"]["sync"]["revision"] = op["syncResult"]["revision"] = (
        "fedcba9876543210fedcba9876543210fedcba98"
    )
    app.extensions["driftguard"].outbox  # noqa: B018 - the store is open
    assert post(app.test_client(), detected_body()).status_code == 202
    app.extensions["driftguard"].worker.drain()
    assert rx.captured == []


def test_the_witness_keeps_secret_values_masked_and_untracked_objects_out(idapp: Flask) -> None:
    client = idapp.test_client()
    state = idapp.extensions["driftguard"]
    old = tracked(secret_live(base64.b64encode(b"db-PLANTED-password").decode()))
    new = tracked(secret_live(base64.b64encode(b"rotated-PLANTED-secret").decode()))
    admit(client, admission_review(new, old=old, field_manager="kubectl-edit"))
    admit(client, admission_review(inference_live(gpu="8"), old=inference_live(gpu="4")))  # not tracked
    rows = state.outbox.query("SELECT kind, name, changes FROM admission_changes")
    assert [(r["kind"], r["name"]) for r in rows] == [("Secret", "inference-db")]
    stored = rows[0]["changes"]
    for plain in ("db-PLANTED-password", "rotated-PLANTED-secret"):
        assert plain not in stored and base64.b64encode(plain.encode()).decode() not in stored
    assert json.loads(stored)[0]["path"] == "/data/password"

"""Issue 21's done-when: the drill's kubectl patch, with its audit Event (and separately its AdmissionReview),
alerts naming the person on all three channels; the episode is in the journal from change to heal."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from driftguard.identity import who
from notifier.app import create_app
from standins import argo_api, receivers
from standins.apiserver import admission_review, audit_event, event_list
from standins.drill import PATCH_TIME, inference_live, serve_drill

from .conftest import AUDIT_TOKEN, READ_TOKEN, make_config, make_settings, notification, post

GPU = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"


def retime_patch(fake: argo_api.FakeArgo, at: float, name: str = "deepseek-inference") -> str:
    """The drill's human writes (managedFields entries) made at ``at`` (whole seconds, as the API server does)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    for item in fake.managed[("argocd", name)]["items"]:
        for key in ("liveState", "normalizedLiveState"):
            live = json.loads(item[key])
            for entry in (live or {}).get("metadata", {}).get("managedFields", []):
                if entry["time"] == PATCH_TIME:  # kubectl-patch on the Deployment, kubectl-edit on the Secret
                    entry["time"] = stamp
            item[key] = json.dumps(live)
    return stamp


def audit_post(client: Any, body: Any, *, token: str = AUDIT_TOKEN, raw: bytes | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post("/v1/audit", data=raw if raw is not None else json.dumps(body), headers=headers)


def deliver(app: Flask, body: dict[str, Any]) -> None:
    resp = post(app.test_client(), body)
    assert resp.status_code == 202, resp.get_json()
    app.extensions["driftguard"].worker.drain()


def alerts_name(rx: receivers.Receivers, expected: str, source: str) -> None:
    """Feishu's card, Slack's message and PagerDuty's custom_details.actor all carry the actor line."""
    feishu, slack, pd = rx.on("/feishu"), rx.on("/slack"), rx.on("/pagerduty")
    assert (len(feishu), len(slack), len(pd)) == (1, 1, 1)
    card = feishu[0].json()
    lines = "\n".join(e["content"] for e in card["card"]["body"]["elements"] if e["tag"] == "markdown")
    user, manager = expected.split(" via ")[0], "kubectl-patch"
    gpu_line = next(line for line in lines.splitlines() if "nvidia.com/gpu" in line)
    assert f"由 {user} 通过 {manager} 修改" in gpu_line, gpu_line  # the person, then the tool they used
    slack_text = json.dumps(slack[0].json(), ensure_ascii=False)
    assert f"`{user}` via `{manager}`" in slack_text or f"由 `{user}` 通过 `{manager}`" in slack_text, (
        slack_text
    )
    event = pd[0].json()
    assert event["payload"]["custom_details"]["actor"].startswith(expected)
    assert f"{user} via {manager}" in event["payload"]["summary"]
    gpu = next(c for c in event["payload"]["custom_details"]["changes"] if c["path"] == GPU)
    assert (gpu["actor"]["user"], gpu["actor"]["matched"], gpu["actor"]["source"]) == (
        "alice@example.com",
        True,
        source,
    )


def incidents(app: Flask, query: str = "") -> dict[str, Any]:
    resp = app.test_client().get(f"/v1/incidents{query}", headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert resp.status_code == 200, resp.get_json()
    return dict(resp.get_json())


def test_drill_patch_with_its_audit_event_names_alice_on_all_channels_and_in_the_journal(
    idapp: Flask, argo: argo_api.FakeArgo, rx: receivers.Receivers
) -> None:
    serve_drill(argo)
    at = int(time.time()) - 2
    stamp = retime_patch(argo, at)
    # another person's patch of a different object, and a read of this one: neither is the answer
    other = audit_event(at=at + 0.1, user="mallory@example.com", name="another-deployment")
    read = audit_event(at=at + 0.1, user="bob@example.com", verb="get", field_manager=None)
    mine = audit_event(at=at + 0.3)
    mine["requestObject"] = {"spec": {"password": "PLANTED-request-body"}}  # never kept (Request level)
    resp = audit_post(idapp.test_client(), event_list(other, read, mine))
    assert resp.status_code == 200 and resp.get_json() == {
        "received": 3,
        "kept": 2,
        "stored": 2,
        "skipped": 0,
    }

    deliver(idapp, notification())
    expected = who(manager="kubectl-patch", time=stamp, user="alice@example.com")
    assert expected.startswith(f"alice@example.com via kubectl-patch, {stamp[11:19]} (")
    alerts_name(rx, expected.split(" (")[0], "audit")
    assert "PLANTED-request-body" not in json.dumps([c.body.decode() for c in rx.captured])

    journal = incidents(idapp, "?app=deepseek-inference&who=alice@example.com")
    [episode] = journal["episodes"]
    assert episode["user"] == "alice@example.com" and episode["field_manager"] == "kubectl-patch"
    assert sorted(episode["alerted_at"]) == ["feishu", "pagerduty", "slack"] and episode["open"]
    assert any(c["path"] == GPU and (c["old"], c["new"]) == ("2", "4") for c in episode["changes"])
    assert "rotated-PLANTED-secret" not in json.dumps(journal)  # the Secret's value stays masked
    assert incidents(idapp, "?who=mallory@example.com")["episodes"] == []

    # self-heal puts Git back: Synced, nothing drifted; the episode closes with its durations
    serve_drill(argo, patched=False, secret_changed=False, sync="Synced")
    argo.apps[("argocd", "deepseek-inference")]["status"]["operationState"]["operation"] = {
        "initiatedBy": {"automated": True}
    }
    deliver(idapp, notification(trigger="on-sync-succeeded"))
    [healed] = incidents(idapp)["episodes"]
    assert not healed["open"] and healed["healed_by"] == "self-heal"
    d = healed["durations_ms"]
    assert 0 < d["to_alert"] <= d["to_heal"] and d["to_notify"] <= d["to_alert"]
    assert set(d["to_alert_by_channel"]) == {"feishu", "pagerduty", "slack"}
    assert incidents(idapp)["summary"]["top_people"] == [{"who": "alice@example.com", "episodes": 1}]

    # the same journal for the terminal, on the same store
    settings = idapp.extensions["driftguard"].settings
    store = (
        ("--database-url", settings.database_url)
        if settings.database_url
        else ("--outbox", str(settings.outbox))
    )
    text = cli("incidents", *store, "--who", "alice@example.com")
    assert "argocd/deepseek-inference  " + healed["actor"].split(" (")[0] in text.splitlines()[0]
    assert "alerted after" in text and "feishu, pagerduty, slack" in text and "(self-heal)" in text
    as_json = json.loads(cli("incidents", *store, "--json", "--app", "deepseek-inference"))
    assert [e["id"] for e in as_json["episodes"]] == [healed["id"]]
    assert cli("incidents", *store, "--who", "nobody@example.com").strip() == "no drift episode matches"


def cli(*args: str) -> str:
    import subprocess
    import sys

    exe = str(Path(sys.executable).parent / "driftguard-notifier")
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_drill_patch_with_its_admission_review_names_alice(
    idapp: Flask, argo: argo_api.FakeArgo, rx: receivers.Receivers
) -> None:
    serve_drill(argo)
    review = admission_review(inference_live())
    resp = idapp.test_client().post(
        "/v1/admission", data=json.dumps(review), headers={"Authorization": f"Bearer {AUDIT_TOKEN}"}
    )
    assert resp.status_code == 200
    assert resp.get_json() == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": True},
    }
    idapp.extensions["driftguard"].recorder.flush()  # written off the request path
    stamp = retime_patch(argo, time.time())  # the write lands in the same second the review was answered
    deliver(idapp, notification())
    alerts_name(rx, f"alice@example.com via kubectl-patch, {stamp[11:19]}", "admission")
    [episode] = incidents(idapp)["episodes"]
    assert episode["who"] == "alice@example.com"


def test_no_identity_record_matched_says_so(
    idapp: Flask, argo: argo_api.FakeArgo, rx: receivers.Receivers
) -> None:
    serve_drill(argo)
    at = int(time.time()) - 60
    stamp = retime_patch(argo, at)
    # the same object and person, but another field manager, and one long before the write
    audit_post(
        idapp.test_client(),
        event_list(audit_event(at=at, field_manager="kubectl-edit"), audit_event(at=at - 600)),
    )
    deliver(idapp, notification())
    text = json.dumps(rx.on("/slack")[0].json())
    said = (
        "via `kubectl-patch` (no identity record matched)",
        "通过 `kubectl-patch` 修改（未匹配到身份记录）",
    )
    assert any(s in text for s in said), text
    assert stamp[11:16] in text  # the field manager's time stays
    assert "alice@example.com" not in text
    assert (
        rx.on("/pagerduty")[0]
        .json()["payload"]["custom_details"]["actor"]
        .endswith("no identity record matched")
    )


@pytest.mark.parametrize(
    ("token", "raw", "status", "says"),
    [
        ("", b"{}", 401, "bearer"),
        ("wrong-token-0123456789", b"{}", 401, "bearer"),
        (AUDIT_TOKEN, b"not json", 400, "not JSON"),
        (AUDIT_TOKEN, b"[" * 1000 + b"]" * 1000, 400, "nested"),
        (AUDIT_TOKEN, json.dumps({"kind": "Event", "items": []}).encode(), 400, "EventList"),
        (
            AUDIT_TOKEN,
            json.dumps({"kind": "EventList", "apiVersion": "v1", "items": []}).encode(),
            400,
            "apiVersion",
        ),
        (AUDIT_TOKEN, b"x" * (9 * 1024 * 1024), 413, "larger"),
    ],
)
def test_bad_audit_posts_get_a_clear_4xx_and_lose_nothing(
    idapp: Flask, token: str, raw: bytes, status: int, says: str
) -> None:
    client = idapp.test_client()
    now = time.time()
    assert audit_post(client, event_list(audit_event(at=now))).status_code == 200
    resp = audit_post(client, None, token=token, raw=raw)
    assert resp.status_code == status and says in resp.get_json()["error"]
    assert idapp.extensions["driftguard"].identities.count() == 1


def test_a_bad_item_is_skipped_the_rest_of_the_batch_is_kept_and_a_resent_batch_is_stored_once(
    idapp: Flask,
) -> None:
    client = idapp.test_client()
    good = audit_event(at=time.time())
    body = event_list(good, {"kind": "Event"}, "nonsense", audit_event(at=time.time(), code=409))
    assert audit_post(client, body).get_json() == {"received": 4, "kept": 1, "stored": 1, "skipped": 2}
    assert audit_post(client, body).get_json()["stored"] == 0  # kube-apiserver retried the batch
    assert idapp.extensions["driftguard"].identities.count() == 1


def test_admission_always_allows_and_rejects_only_the_unreadable(idapp: Flask) -> None:
    client = idapp.test_client()
    review = admission_review(inference_live())
    assert client.post("/v1/admission", data=json.dumps(review)).status_code == 401
    auth = {"Authorization": f"Bearer {AUDIT_TOKEN}"}
    assert client.post("/v1/admission", data=b"{", headers=auth).status_code == 400
    # a review we cannot read as a write is still allowed, and not recorded
    odd = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u-1"}}
    resp = client.post("/v1/admission", data=json.dumps(odd), headers=auth)
    assert resp.get_json()["response"] == {"uid": "u-1", "allowed": True}
    dry = admission_review(inference_live(), dry_run=True)
    assert client.post("/v1/admission", data=json.dumps(dry), headers=auth).get_json()["response"]["allowed"]
    idapp.extensions["driftguard"].recorder.flush()
    assert idapp.extensions["driftguard"].identities.count() == 0
    ok = client.post("/v1/admission", data=json.dumps(review), headers=auth)
    assert ok.get_json()["response"]["allowed"] and ok.headers["Server-Timing"].startswith("app;dur=")
    idapp.extensions["driftguard"].recorder.flush()
    assert idapp.extensions["driftguard"].identities.count() == 1


def test_the_store_is_bounded_and_forgets_after_the_retention(
    tmp_path: Path, argo: argo_api.FakeArgo, rx: receivers.Receivers, outbox_url: str
) -> None:
    settings = make_settings(
        tmp_path, argo.url, outbox_url, audit_token=AUDIT_TOKEN, identity_max_rows=50, identity_retention=3600
    )
    application = create_app(settings, config=make_config(rx))
    try:
        client = application.test_client()
        now = time.time()
        storm = [audit_event(at=now - 10 + i / 100, name=f"d-{i}") for i in range(120)]
        assert audit_post(client, event_list(*storm)).get_json()["stored"] == 120
        store = application.extensions["driftguard"].identities
        assert store.count() == 50
        kept = {e.name for e in store.candidates(namespace="ai-serving", name="d-119", uid="")}
        assert kept == {"d-119"}  # the newest survive
        assert store.candidates(namespace="ai-serving", name="d-0", uid="") == []
        audit_post(client, event_list(audit_event(at=now - 7200, name="old")))
        assert store.candidates(namespace="ai-serving", name="old", uid="") == []
    finally:
        application.extensions["driftguard"].worker.expander.close()
        application.extensions["driftguard"].outbox.close()


def test_reading_the_journal_needs_the_read_token_not_the_webhook_token(idapp: Flask) -> None:
    from .conftest import TOKEN

    client = idapp.test_client()
    for headers in ({}, {"Authorization": f"Bearer {TOKEN}"}, {"Authorization": f"Bearer {AUDIT_TOKEN}"}):
        assert client.get("/v1/incidents", headers=headers).status_code == 401
        assert client.get("/incidents", headers=headers).status_code == 401
    ok = client.get("/v1/incidents", headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert ok.status_code == 200 and ok.get_json()["episodes"] == []
    bad = client.get("/v1/incidents?since=yesterday", headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert bad.status_code == 400 and "since" in bad.get_json()["error"]

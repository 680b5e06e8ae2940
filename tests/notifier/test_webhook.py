"""POST /v1/notifications: authentication, validation, size limit, persistence before the 202."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from driftguard.argocd import ArgoCDSettings
from driftguard.errors import ConfigError
from notifier.settings import NotifierSettings

from .conftest import TOKEN, notification, post


def stored(app: Flask) -> list[dict[str, Any]]:
    return app.extensions["driftguard"].outbox.query("SELECT * FROM notifications")  # type: ignore[no-any-return]


def test_accepted_is_stored_before_the_202(app: Flask) -> None:
    resp = post(app.test_client(), notification())
    assert resp.status_code == 202
    [row] = stored(app)
    assert row["id"] == resp.get_json()["id"] and row["state"] == "pending"
    assert (row["app"], row["app_namespace"], row["trigger"]) == (
        "deepseek-inference",
        "argocd",
        "on-drift-detected",
    )
    assert json.loads(row["body"])["app"]["metadata"]["name"] == "deepseek-inference"


def test_no_content_type_is_fine_and_repeats_are_accepted(app: Flask) -> None:
    client = app.test_client()
    raw = json.dumps(notification()).encode()
    assert post(client, None, raw=raw).status_code == 202
    assert post(client, None, raw=raw, content_type="text/plain").status_code == 202
    assert len(stored(app)) == 2


@pytest.mark.parametrize("token", ["", "wrong-token-wrong-token", TOKEN + "x", TOKEN[:-1]])
def test_wrong_or_missing_token_is_401(app: Flask, token: str) -> None:
    resp = post(app.test_client(), notification(), token=token)
    assert resp.status_code == 401 and resp.get_json() == {"error": "missing or wrong bearer token"}
    assert stored(app) == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"trigger": "x"}', "`app` must be an object"),
        (b'{"app": {"metadata": {}}}', "`app.metadata.name` is required"),
        (b'{"app": {"metadata": {"name": "Bad_Name!"}}}', "not a valid Kubernetes object name"),
        (b'{"app": {"metadata": {"name": "a", "namespace": "x/y"}}}', "not a valid namespace"),
        (b'{"trigger": 5, "app": {"metadata": {"name": "a"}}}', "`trigger` must be a string"),
    ],
)
def test_bad_bodies_are_400_with_a_reason(app: Flask, raw: bytes, message: str) -> None:
    resp = post(app.test_client(), None, raw=raw)
    assert resp.status_code == 400 and message in resp.get_json()["error"]
    assert stored(app) == []


def test_body_over_the_limit_is_413(app: Flask) -> None:
    big = notification()
    big["padding"] = "x" * (8 * 1024 * 1024 + 10)
    resp = post(app.test_client(), big)
    assert resp.status_code == 413 and "larger than 8388608 bytes" in resp.get_json()["error"]
    assert stored(app) == []


def test_start_up_refuses_without_a_token(tmp_path: Path) -> None:
    argocd = ArgoCDSettings(url="http://127.0.0.1:1", token="t")
    with pytest.raises(ConfigError, match="DRIFTGUARD_NOTIFIER_TOKEN"):
        NotifierSettings(outbox=tmp_path / "o", argocd=argocd)
    key = b"redact-key-for-tests-0123456789abcdef"
    assert NotifierSettings(auth="none", outbox=tmp_path / "o", argocd=argocd, redact_key=key).auth == "none"
    with pytest.raises(ConfigError, match="DRIFTGUARD_NOTIFIER_AUTH"):
        NotifierSettings(auth="basic", token=TOKEN, argocd=argocd)
    with pytest.raises(ConfigError, match="DRIFTGUARD_ARGOCD_URL"):
        NotifierSettings.from_env({"DRIFTGUARD_NOTIFIER_TOKEN": TOKEN})


def test_unknown_route_is_json(app: Flask) -> None:
    resp = app.test_client().get("/v1/nope")
    assert resp.status_code == 404 and "openapi" in resp.get_json()["error"]
    assert app.test_client().get("/v1/notifications").status_code == 405


def test_argo_cd_retrying_the_same_notification_is_stored_once(app: Flask) -> None:
    client = app.test_client()
    status = {
        "sync": {"status": "OutOfSync", "revision": "abc123"},
        "health": {"status": "Healthy"},
        "reconciledAt": "1",
    }
    body = notification(status=status)
    first = post(client, body)
    retry = post(
        client, notification(status={**status, "reconciledAt": "2"})
    )  # a reconcile later: same state
    assert first.status_code == retry.status_code == 202
    assert retry.get_json() == {"id": first.get_json()["id"], "duplicate": True}
    moved = post(
        client, notification(status={**status, "sync": {"status": "OutOfSync", "revision": "def456"}})
    )
    assert (
        moved.status_code == 202 and "duplicate" not in moved.get_json()
    )  # a new revision is a new notification
    assert len(stored(app)) == 2
    text = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).get_data(as_text=True)
    assert 'driftguard_notifier_received_total{outcome="duplicate"} 1.0' in text


def _shipped_body(trigger: str, app_obj: dict[str, Any]) -> dict[str, Any]:
    """The body the shipped template renders for ``app_obj`` (manifests/base/notifier)."""
    import yaml

    from tests.manifests.test_notifier_manifests import go_template

    patch = (
        Path(__file__).resolve().parents[2] / "manifests/components/argocd/argocd-notifications-cm-patch.yaml"
    )
    data = yaml.safe_load(patch.read_text())["data"]
    [cond] = yaml.safe_load(data[f"trigger.driftguard-{trigger}"])
    hook = yaml.safe_load(data[f"template.{cond['send'][0]}"])["webhook"]["driftguard"]
    return json.loads(go_template(hook["body"], app_obj))  # type: ignore[no-any-return]


def test_a_second_episode_is_a_new_notification_and_a_retry_of_one_send_is_not(app: Flask) -> None:
    """Issue 30: a new drift after the first healed (same revision, same status) reached the
    channels as {"duplicate": true}. The shipped body carries metadata.resourceVersion and the
    operation's times; notifications-engine's retries of one send (the same body) still collapse."""
    from standins.argo_api import application

    client = app.test_client()
    shop = application("shop", resources=[("apps", "Deployment", "shop", "api")], sync="OutOfSync")
    first = _shipped_body("on-drift-detected", shop)
    assert first["trigger"] == "driftguard-on-drift-detected"
    assert first["app"]["metadata"]["resourceVersion"] == "42"
    a = post(client, first)
    retries = [post(client, first) for _ in range(3)]  # go-retryablehttp: RetryMax 3, same body
    assert a.status_code == 202 and "duplicate" not in a.get_json()
    assert all(r.get_json() == {"id": a.get_json()["id"], "duplicate": True} for r in retries)
    second_app = json.loads(json.dumps(shop))
    second_app["metadata"]["resourceVersion"] = "97"  # healed, drifted again: same status, new version
    second = post(client, _shipped_body("on-drift-detected", second_app))
    assert second.status_code == 202 and "duplicate" not in second.get_json()
    # a second failed sync at the same revision: a new operation (startedAt), a new notification
    failed = json.loads(json.dumps(shop))
    failed["status"]["operationState"] = {
        "phase": "Failed",
        "message": "one or more objects failed to apply",
        "startedAt": "2026-11-29T14:00:00Z",
        "finishedAt": "2026-11-29T14:00:05Z",
        "operation": {"sync": {"revision": "0123456789abcdef0123456789abcdef01234567"}},
    }
    again = json.loads(json.dumps(failed))
    again["status"]["operationState"].update(
        startedAt="2026-11-29T14:03:00Z", finishedAt="2026-11-29T14:03:04Z"
    )
    f1 = post(client, _shipped_body("on-sync-failed", failed))
    f2 = post(client, _shipped_body("on-sync-failed", again))
    assert "duplicate" not in f1.get_json() and "duplicate" not in f2.get_json()
    rows = stored(app)
    assert len(rows) == 4
    assert {r["trigger"] for r in rows} == {"on-drift-detected", "on-sync-failed"}  # the prefix is dropped


def test_a_large_apps_body_is_accepted_and_stored_slim(app: Flask) -> None:
    """The shipped body carries status.resources whole: 20,000 resources fit, the outbox keeps what it uses."""
    from standins.argo_api import application

    big = application(
        "big", resources=[("", "ConfigMap", "ns", f"cm-{i}") for i in range(20_000)], sync="OutOfSync"
    )
    for r in big["status"]["resources"]:
        r["status"] = "Synced"
    big["status"]["resources"][7]["status"] = "OutOfSync"
    big["status"]["resources"][8]["requiresPruning"] = True
    body = _shipped_body("on-drift-detected", big)
    raw = json.dumps(body)
    assert 2 * 1024 * 1024 < len(raw) < 8 * 1024 * 1024
    resp = post(app.test_client(), body)
    assert resp.status_code == 202
    [row] = stored(app)
    kept = json.loads(row["body"])["app"]["status"]["resources"]
    assert [r["name"] for r in kept] == ["cm-7", "cm-8"] and len(row["body"]) < 4096

"""Issue 30's replay: Application states, what notifications-engine sends for each under the shipped
triggers (tests/notifier/engine_model.py, from its source), posted to the notifier under gunicorn
(every send twice: the webhook client's retry of the same body), and what each channel receives.

The Argo CD stand-in answers with the state of the step, as the API would when the notifier reads.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from standins.argo_api import FakeArgo, application
from standins.argo_api import serve as FakeArgoServed
from standins.drill import serve_drill
from standins.processes import free_port, start_gunicorn, stop
from standins.receivers import Receivers
from standins.receivers import serve as receivers_served
from tests.helpers import examples, outbox_depth, wait_until
from tests.manifests.test_notifier_triggers import validate as validate_crd
from tests.notifier.engine_model import NotificationsEngine

from .conftest import PD_KEY, TOKEN, service_env

CHANNELS = ("/feishu", "/slack", "/pagerduty")
REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def service(tmp_path: Path, argo: FakeArgo, rx: Receivers) -> Iterator[str]:
    env = service_env(
        tmp_path,
        argo,
        rx.channels(feishu_secret="x", routing_key=PD_KEY),
        DRIFTGUARD_ARGOCD_RETRIES="0",
        DRIFTGUARD_NOTIFIER_RECHECK_INTERVAL="3600",  # only what Argo CD sends, no re-checks
        DRIFTGUARD_NOTIFIER_MAX_BODY_BYTES=str(4 * 1024 * 1024),
    )
    port = free_port()
    proc: subprocess.Popen[bytes] = start_gunicorn(
        "notifier.app:create_app()", port, env, tmp_path / "gunicorn.log"
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
    assert "Traceback" not in (tmp_path / "gunicorn.log").read_text()


def settled(url: str) -> bool:
    """Nothing pending in the outbox (notifications expanded, messages sent), nothing dead."""
    depth = outbox_depth(url, TOKEN)
    return bool(depth) and all(v == 0 for v in depth.values())


def replay(
    url: str,
    argo: FakeArgo,
    rx: Receivers,
    steps: list[tuple[dict[str, Any], dict[str, Any] | None, list[int]]],
) -> list[list[str]]:
    """Each step: the Application, the managed-resources answer (None: keep), the messages each
    channel has received in all once the step settled. Returns the triggers sent per step."""
    engine = NotificationsEngine()
    sent_per_step = []
    for n, (step_app, managed, expected) in enumerate(steps):
        app = copy.deepcopy(step_app)
        # every status write is a new resourceVersion (the kube-apiserver's rule), so no two steps share one
        app["metadata"]["resourceVersion"] = str(int(app["metadata"].get("resourceVersion") or 0) * 1000 + n)
        validate_crd(app)
        argo.put(copy.deepcopy(app))
        if managed is not None:
            argo.managed[("argocd", app["metadata"]["name"])] = managed
        sends = engine.process(app)
        sent_per_step.append([s.trigger for s in sends])
        for s in sends:
            for _ in range(2):  # the send and a retry of it (go-retryablehttp: the same body)
                answer = requests.post(
                    f"{url}/v1/notifications",
                    data=s.body,
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    timeout=10,
                )
                assert answer.status_code == 202, answer.text
        wait_until(lambda: settled(url), "the outbox to settle")
        got = [len(rx.on(p)) for p in CHANNELS]
        assert got == expected, f"step {n}: {got} != {expected} after {sent_per_step[-1]}"
    return sent_per_step


def drift_step(argo: FakeArgo, *, patched: bool, rv: int) -> tuple[dict[str, Any], dict[str, Any]]:
    serve_drill(argo, patched=patched, secret_changed=False, sync="OutOfSync" if patched else "Synced")
    app = argo.apps[("argocd", "deepseek-inference")]
    app["metadata"]["resourceVersion"] = str(rv)
    # the last operation: a sync of the same revision that put Git's state back (rv's minute)
    app["status"]["operationState"] = {
        "operation": {"sync": {"revision": REVISION}, "initiatedBy": {"automated": True}},
        "phase": "Succeeded",
        "message": "successfully synced (all tasks run)",
        "startedAt": f"2026-11-29T14:{rv - 100 - rv % 2:02d}:00Z",
        "finishedAt": f"2026-11-29T14:{rv - 100 - rv % 2:02d}:05Z",
    }
    if patched:
        app["status"]["resources"][0]["status"] = "OutOfSync"
        app["status"]["resources"][1]["status"] = "Synced"
    managed = argo.managed[("argocd", "deepseek-inference")]
    return copy.deepcopy(app), copy.deepcopy(managed)


def test_two_drift_episodes_each_reach_every_channel_once(
    service: str, argo: FakeArgo, rx: Receivers
) -> None:
    steps = [
        (*drift_step(argo, patched=False, rv=100), [0, 0, 0]),  # Synced: resolved fires, nothing was open
        (*drift_step(argo, patched=True, rv=101), [1, 1, 1]),  # kubectl patch: the alert
        (*drift_step(argo, patched=True, rv=102), [1, 1, 1]),  # a later reconcile: already notified
        (*drift_step(argo, patched=False, rv=103), [2, 2, 2]),  # healed: resolved
        (*drift_step(argo, patched=True, rv=104), [3, 3, 3]),  # the same patch again: a new episode
        (*drift_step(argo, patched=False, rv=105), [4, 4, 4]),
    ]
    sent = replay(service, argo, rx, steps)
    assert sent == [
        ["driftguard-on-drift-resolved"],
        ["driftguard-on-drift-detected"],
        [],
        ["driftguard-on-drift-resolved"],
        ["driftguard-on-drift-detected"],
        ["driftguard-on-drift-resolved"],
    ]
    pd = [c.json() for c in rx.on("/pagerduty")]
    assert [(e["event_action"], e["dedup_key"]) for e in pd] == [
        ("trigger", "driftguard/argocd/deepseek-inference/drift"),
        ("resolve", "driftguard/argocd/deepseek-inference/drift"),
    ] * 2
    feishu = [json.loads(c.body)["card"]["header"]["title"]["content"] for c in rx.on("/feishu")]
    assert feishu[0].startswith("重要｜deepseek-inference：GPU 限制 2 → 4") and feishu[2] == feishu[0]
    assert feishu[1].startswith("已恢复")
    for c in rx.on("/slack"):  # every Slack message links to Argo CD
        assert any(b["type"] == "actions" for b in json.loads(c.body)["blocks"])


def _op(phase: str, started: str, finished: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operation": {"sync": {"revision": REVISION}, "initiatedBy": {"username": "ci"}},
        "phase": phase,
        "startedAt": started,
        "message": "one or more objects failed to apply, reason: admission webhook denied the request"
        if phase == "Failed"
        else "waiting",
    }
    if finished:
        op["finishedAt"] = finished
    if phase == "Failed":
        op["syncResult"] = {
            "revision": REVISION,
            "resources": [
                {
                    "group": "apps",
                    "version": "v1",
                    "kind": "Deployment",
                    "namespace": "shop",
                    "name": "api",
                    "status": "SyncFailed",
                    "message": "admission webhook denied the request",
                }
            ],
        }
    return op


def shop(
    phase: str | None, started: str = "", finished: str | None = None, *, sync: str = "OutOfSync"
) -> dict[str, Any]:
    app = application(
        "shop", resources=[("apps", "Deployment", "shop", "api")], sync=sync, dest_namespace="shop"
    )
    app["status"]["resources"][0]["status"] = "Synced"
    if phase:
        app["status"]["operationState"] = _op(phase, started, finished)
    return app


def test_a_second_sync_failure_at_the_same_revision_is_sent_and_resolves_on_its_own(
    service: str, argo: FakeArgo, rx: Receivers
) -> None:
    empty = {"items": []}
    steps = [
        (shop("Running", "2026-11-29T14:00:00Z"), empty, [0, 0, 0]),
        (shop("Failed", "2026-11-29T14:00:00Z", "2026-11-29T14:00:05Z"), None, [1, 1, 1]),
        (shop("Running", "2026-11-29T14:03:00Z"), None, [1, 1, 1]),
        (shop("Failed", "2026-11-29T14:03:00Z", "2026-11-29T14:03:04Z"), None, [2, 2, 2]),
        (shop("Succeeded", "2026-11-29T14:05:00Z", "2026-11-29T14:05:09Z", sync="Synced"), None, [2, 2, 3]),
    ]
    sent = replay(service, argo, rx, steps)
    assert sent[1] == ["driftguard-on-sync-failed"] and sent[3] == ["driftguard-on-sync-failed"]
    pd = [(c.json()["event_action"], c.json()["dedup_key"]) for c in rx.on("/pagerduty")]
    assert pd == [("trigger", "driftguard/argocd/shop/sync")] * 2 + [
        ("resolve", "driftguard/argocd/shop/sync")
    ]
    assert all("Sync failed: shop" in c.body.decode() for c in rx.on("/slack"))


def refused_412() -> dict[str, Any]:
    from tests.notifier.test_notices import REFUSAL, WRAP, postmortem_app

    return postmortem_app(WRAP + REFUSAL)


def test_the_412_deployment_refusal_is_one_message_and_no_prune_notice(
    service: str, argo: FakeArgo, rx: Receivers
) -> None:
    synced = application("payments-prod", sync="Synced", dest_namespace="payments")
    steps = [
        (synced, {"items": []}, [0, 0, 0]),
        (refused_412(), None, [1, 1, 1]),
        (refused_412(), None, [1, 1, 1]),
        (synced, None, [1, 1, 2]),  # fixed: PagerDuty's render incident resolves
    ]
    sent = replay(service, argo, rx, steps)
    assert sent[1] == ["driftguard-on-render-refused"]  # not on-prune-pending, though all require pruning
    slack = rx.on("/slack")[0].body.decode()
    assert "Render refused by driftguard" in slack and "86 `PersistentVolumeClaim` (protected)" in slack
    assert [c.json()["dedup_key"] for c in rx.on("/pagerduty")] == [
        "driftguard/argocd/payments-prod/render"
    ] * 2


def test_an_upstream_application_goes_through_the_triggers_and_the_intake() -> None:
    """Argo CD's own testdata Application (tests/data/argo-cd, controller/testdata/diff-cache.yaml):
    Synced fires only the resolved trigger; OutOfSync the detected one, whose body carries its
    episode; both are accepted, and a retry of either is stored once."""
    import yaml

    from notifier.webhook import episode, intake_key, validate

    upstream = yaml.safe_load(
        (Path(__file__).resolve().parents[1] / "data/argo-cd/app-diff-cache.yaml").read_text()
    )
    validate_crd(upstream)
    engine = NotificationsEngine()
    [first] = engine.process(upstream)
    assert first.trigger == "driftguard-on-drift-resolved"
    drifted = copy.deepcopy(upstream)
    drifted["metadata"]["resourceVersion"] = "722811400"
    drifted["status"]["sync"]["status"] = "OutOfSync"
    drifted["status"]["resources"][0]["status"] = "OutOfSync"
    validate_crd(drifted)
    [second] = engine.process(drifted)
    assert second.trigger == "driftguard-on-drift-detected"
    body = json.loads(second.body)
    assert validate(body) == ("velero-test", "argo-cd", "on-drift-detected")
    assert episode(body) == {
        "resourceVersion": "722811400",
        "startedAt": upstream["status"]["operationState"]["startedAt"],
        "finishedAt": upstream["status"]["operationState"]["finishedAt"],
    }
    again = json.loads(second.body)  # go-retryablehttp resends the same bytes
    assert intake_key(again, "velero-test", "argo-cd", "on-drift-detected") == intake_key(
        body, "velero-test", "argo-cd", "on-drift-detected"
    )


SHAPES = (
    "synced",
    "out-of-sync",
    "sync-running",
    "sync-failed",
    "reverted-after-failed-sync",
    "render-refused",
    "render-refused-pruning",
    "requires-pruning",
    "prune-skipped",
)


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    walk=st.lists(
        st.tuples(st.sampled_from(SHAPES), st.integers(min_value=1, max_value=4)), min_size=1, max_size=10
    )
)
@pytest.mark.slow  # a big property run over replays
def test_every_send_is_stored_once_however_often_it_is_retried(
    tmp_path_factory: pytest.TempPathFactory, walk: list[tuple[str, int]]
) -> None:
    """Property, against the reference model (engine_model.py): for any walk through the situations
    the triggers tell apart, each send notifications-engine makes is stored exactly once, whether
    its webhook was posted once or retried (up to go-retryablehttp's 3 retries, the same body)."""
    from notifier.app import create_app
    from tests.manifests.test_notifier_triggers import shape

    from .conftest import make_config, make_settings

    with FakeArgoServed() as argo, receivers_served() as rx:
        flask_app = create_app(
            make_settings(tmp_path_factory.mktemp("prop"), argo.url), config=make_config(rx)
        )
        client = flask_app.test_client()
        engine = NotificationsEngine()
        sends = 0
        for n, (name, attempts) in enumerate(walk):
            app = shape(name)
            app["metadata"]["resourceVersion"] = str(1000 + n)  # every status write is a new version
            for s in engine.process(app):
                sends += 1
                answers = [
                    client.post(
                        "/v1/notifications", data=s.body, headers={"Authorization": f"Bearer {TOKEN}"}
                    )
                    for _ in range(attempts)
                ]
                assert all(a.status_code == 202 for a in answers)
                first = answers[0].get_json()
                assert "duplicate" not in first
                assert all(a.get_json() == {"id": first["id"], "duplicate": True} for a in answers[1:])
        state = flask_app.extensions["driftguard"]
        assert len(state.outbox.query("SELECT id FROM notifications")) == sends
        state.worker.stop()
        state.worker.expander.close()
        state.outbox.close()

"""The real service under gunicorn: honest JSON errors, an outbox that cannot be written, new drift during an episode."""

from __future__ import annotations

import json
import re
import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from standins.argo_api import FakeArgo
from standins.drill import serve_drill
from standins.processes import free_port, start_gunicorn, stop
from standins.receivers import Receivers
from tests.helpers import outbox_idle, wait_until

from .conftest import PD_KEY, TOKEN, notification, service_env


@pytest.fixture
def service(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, outbox_url: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    yield from _service(tmp_path, argo, rx, outbox_url)


@pytest.fixture
def sqlite_service(
    tmp_path: Path, argo: FakeArgo, rx: Receivers
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The service on its SQLite file (a full disk is a fault of that store; PostgreSQL down: test_ha.py)."""
    yield from _service(tmp_path, argo, rx, "")


def _service(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, outbox_url: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    env = service_env(
        tmp_path,
        argo,
        rx.channels(feishu_secret="x", routing_key=PD_KEY),
        DRIFTGUARD_ARGOCD_RETRIES="0",
        DRIFTGUARD_NOTIFIER_RECHECK_INTERVAL="1",
        DRIFTGUARD_NOTIFIER_MAX_BODY_BYTES=str(4 * 1024 * 1024),
        DRIFTGUARD_NOTIFIER_DATABASE_URL=outbox_url,
    )
    port = free_port()
    proc = start_gunicorn("notifier.app:create_app()", port, env, tmp_path / "gunicorn.log")
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop(proc)
    assert "Traceback" not in (tmp_path / "gunicorn.log").read_text()


def _post(url: str, data: bytes | str, token: str = TOKEN) -> requests.Response:
    return requests.post(
        f"{url}/v1/notifications", data=data, headers={"Authorization": f"Bearer {token}"}, timeout=10
    )


def test_every_error_is_json_and_deep_json_is_a_400(service: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, _ = service
    deep = "[" * 100_000 + "]" * 100_000
    answers = {
        "deep": _post(url, deep),
        "deep-object": _post(url, '{"a":' * 50_000 + "1" + "}" * 50_000),
        "malformed": _post(url, '{"app": '),
        "not-utf8": _post(url, b"\xff\xfe{"),
        "wrong-token": _post(url, json.dumps(notification()), token="nope"),
        "too-large": _post(url, b" " * (5 * 1024 * 1024)),
        "get": requests.get(f"{url}/v1/notifications", timeout=5),
        "unknown": requests.get(f"{url}/nowhere", timeout=5),
    }
    expected = {"deep": 400, "deep-object": 400, "malformed": 400, "not-utf8": 400, "wrong-token": 401}
    expected |= {"too-large": 413, "get": 405, "unknown": 404}
    for name, resp in answers.items():
        assert resp.status_code == expected[name], (name, resp.status_code, resp.text[:200])
        assert resp.headers["Content-Type"].startswith("application/json"), name
        assert set(resp.json()) == {"error"} and "Traceback" not in resp.text, name


def _workers(master: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def test_an_outbox_that_cannot_be_written_answers_503_and_turns_not_ready_until_a_write_succeeds(
    sqlite_service: tuple[str, subprocess.Popen[bytes]], argo: FakeArgo, rx: Receivers
) -> None:
    url, proc = sqlite_service
    serve_drill(argo)
    workers = _workers(proc.pid)
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    for pid in workers:  # a full disk, as the kernel tells a writer past its file-size limit (EFBIG)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, hard))
    try:
        for _ in range(4):  # both workers answer some of these
            resp = _post(url, json.dumps(notification()))
            assert resp.status_code == 503, resp.text
            assert "outbox cannot be written" in resp.json()["error"]
            ready = requests.get(f"{url}/readyz", timeout=5)
            assert ready.status_code == 503 and ready.json()["status"] == "not ready"
    finally:
        for pid in workers:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
    wait_until(
        lambda: all(requests.get(f"{url}/readyz", timeout=5).status_code == 200 for _ in range(4)),
        "ready again",
    )
    assert rx.captured == []  # nothing was accepted, so nothing is owed
    assert _post(url, json.dumps(notification())).status_code == 202
    wait_until(
        lambda: sorted(c.path for c in rx.captured) == ["/feishu", "/pagerduty", "/slack"], "one message each"
    )


@pytest.mark.slow  # waits for re-checks of a gunicorn service
def test_new_drift_while_the_app_stays_out_of_sync_alerts(
    service: tuple[str, subprocess.Popen[bytes]], argo: FakeArgo, rx: Receivers
) -> None:
    """HPA replicas only (nothing alerts), then a kubectl patch of the GPU limit: Argo CD does not fire again."""
    url, _ = service
    serve_drill(argo, patched=False, secret_changed=False, sync="OutOfSync")
    assert _post(url, json.dumps(notification())).status_code == 202
    wait_until(lambda: any(r[0].endswith("/managed-resources") for r in argo.requests), "the expansion")
    wait_until(lambda: outbox_idle(url, TOKEN), "the notification expanded")
    assert rx.captured == []  # the HPA's write is not drift to alert
    serve_drill(argo, patched=True, secret_changed=False, sync="OutOfSync")  # still OutOfSync: no webhook
    wait_until(lambda: len(rx.captured) == 3, "three messages")
    for path in ("/feishu", "/slack", "/pagerduty"):
        [msg] = rx.on(path)
        assert "nvidia.com" in msg.body.decode()

    def checks() -> int:
        return sum(1 for r in list(argo.requests) if r[0].endswith("/managed-resources"))

    seen = checks()
    # more re-checks of the same drift (one a second here), each done: the dedup window holds
    wait_until(lambda: checks() >= seen + 3, "two more re-checks")
    wait_until(lambda: outbox_idle(url, TOKEN), "the re-checks' work done")
    assert len(rx.captured) == 3


def test_the_new_triggers_each_send_their_own_message(
    service: tuple[str, subprocess.Popen[bytes]], argo: FakeArgo, rx: Receivers
) -> None:
    from standins.argo_api import application

    refused = application("app-refused", sync="Unknown")
    refused["status"]["conditions"] = [
        {
            "type": "ComparisonError",
            # as Argo CD stores the CMP's refusal (driftguard/cause.py: the wrapping, then the CMP's lines)
            "message": "Failed to load target state: rpc error: code = Unknown desc = plugin sidecar failed."
            " error generating manifests in cmp: rpc error: code = Unknown desc = `driftguard-cmp generate`"
            " failed exit status 3: driftguard: refused by empty-output: the render produced 0 resources\n"
            "fix: set allowEmpty if intended\n"
            "line 3\nline 4\nline 5\nline 6\nline 7 is past the first lines",
        }
    ]
    failed = application("app-failed", sync="OutOfSync", health="Degraded")
    failed["status"]["operationState"] = {
        "phase": "Failed",
        "startedAt": "2026-11-29T14:00:00Z",
        "operation": {"sync": {}},
        "message": "one or more objects failed to apply, reason: admission webhook denied the request",
    }
    pruning = application(
        "app-pruning",
        resources=[("", "Service", "shop", "old-a"), ("", "Service", "shop", "old-b")],
        sync="OutOfSync",
    )
    for r in pruning["status"]["resources"]:
        r["requiresPruning"] = True
    pruning["status"]["operationState"] = {
        "phase": "Succeeded",
        "startedAt": "2026-11-29T14:00:00Z",
        "operation": {"sync": {}},
        "syncResult": {
            "revision": "abc",
            "resources": [
                {
                    "group": "apps",
                    "version": "v1",
                    "kind": "Deployment",
                    "namespace": "shop",
                    "name": "old-api",
                    "status": "PruneSkipped",
                    "message": "ignored (requires pruning)",
                }
            ],
        },
    }
    for app in (refused, failed, pruning):
        argo.put(app)
        argo.managed[("argocd", app["metadata"]["name"])] = {"items": []}
    for name, trigger in (
        ("app-refused", "on-render-refused"),
        ("app-failed", "on-sync-failed"),
        ("app-pruning", "on-prune-pending"),
    ):
        assert _post(url_of(service), json.dumps(notification(name, trigger))).status_code == 202
    wait_until(lambda: len(rx.captured) == 9, "nine messages")

    def text(path: str, app: str) -> str:
        [msg] = [
            c.body.decode() for c in rx.on(path) if re.search(rf"(?<![\w-]){app}(?![\w-])", c.body.decode())
        ]
        return msg

    slack = text("/slack", "app-refused")
    assert (
        "Render refused" in slack
        and "refused by empty-output" in slack
        and "synced and pruned nothing" in slack
    )
    assert "line 7" not in slack
    assert "driftguard 拒绝渲染" in text("/feishu", "app-refused") and "refused by empty-output" in text(
        "/feishu", "refused"
    )
    assert "admission webhook denied" in text("/slack", "app-failed") and "Sync failed" in text(
        "/slack", "app-failed"
    )
    assert "health `Degraded`" in text("/slack", "app-failed")
    pd = json.loads(text("/pagerduty", "app-pruning"))
    assert pd["payload"]["custom_details"]["counts"] == {"Service": 2, "Deployment": 1}
    assert "Prune pending" in pd["payload"]["summary"] and pd["payload"]["severity"] == "warning"


def url_of(service: tuple[str, subprocess.Popen[bytes]]) -> str:
    return service[0]


def test_the_drill_with_a_missing_service_and_an_orphan_configmap_alerts_on_all_three_channels(
    service: tuple[str, subprocess.Popen[bytes]], argo: FakeArgo, rx: Receivers
) -> None:
    """The 412-Deployment incident's own class: a resource gone from the cluster, one about to be pruned."""
    from standins.argo_api import application
    from standins.drill import managed_item

    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "payment", "namespace": "shop"},
        "spec": {"selector": {"app": "payment"}, "ports": [{"port": 80}]},
    }
    orphan = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "payment-legacy", "namespace": "shop"},
    }
    argo.put(application("payment", resources=[("", "Service", "shop", "payment")], sync="OutOfSync"))
    argo.managed[("argocd", "payment")] = {"items": [managed_item(svc, None), managed_item(None, orphan)]}
    assert _post(service[0], json.dumps(notification("payment"))).status_code == 202
    wait_until(lambda: len(rx.captured) == 3, "three messages")
    feishu, slack, pd = (rx.on(p)[0].body.decode() for p in ("/feishu", "/slack", "/pagerduty"))
    assert "payment-legacy" in feishu and "集群中缺失 1 个资源" in feishu and "1 个资源将被清理" in feishu
    assert "missing from the cluster" in slack and "would be pruned" in slack
    event = json.loads(pd)
    assert event["payload"]["severity"] == "critical"
    assert {c["class"] for c in event["payload"]["custom_details"]["kinds"]} == {
        "missing",
        "prune-candidate",
    }


# What the CMP prints when the shrink guard refuses (tests/cmp_plugin/test_incident.py pins these
# lines against the real driftguard-cmp), wrapped as Argo CD v3.5 stores it in the ComparisonError
# (cmpserver/plugin/plugin.go CmdError, reposerver/repository/repository.go, controller/state.go).
REFUSED_CONDITION = (
    "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown"
    " desc = error generating manifests in cmp: rpc error: code = Unknown desc = error generating manifests:"
    " `driftguard-cmp generate` failed exit status 3: driftguard: refused by shrink: the render would prune"
    " 4 of 4 resources the Application manages (1 of a protected kind (PersistentVolumeClaim))\n"
    "  Deployment.apps shop/api-0  <- hidden by the chart default of enabled (templates/deployment.yaml:1)\n"
    "  baseline: the cluster (Application status)\n"
    "driftguard: gating key `enabled` relies on the chart default (templates/deployment.yaml:1)\n"
    "fix: if this is intended, annotate the Application: driftguard.io/approve-prune=<revision>"
)


def test_a_prune_set_from_a_refused_render_carries_its_cause_through_the_service(
    service: tuple[str, subprocess.Popen[bytes]], argo: FakeArgo, rx: Receivers
) -> None:
    """Argo CD without a target (the render refused) marks everything live for pruning: the alert says why."""
    from standins.argo_api import application
    from standins.drill import managed_item

    app = application("app-gone", sync="Unknown", dest_namespace="shop")
    app["status"]["conditions"] = [{"type": "ComparisonError", "message": REFUSED_CONDITION}]
    argo.put(app)
    live = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"api-{i}", "namespace": "shop"}}
        for i in range(3)
    ] + [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "shop"},
        }
    ]
    argo.managed[("argocd", "app-gone")] = {"items": [managed_item(None, obj) for obj in live]}
    assert _post(url_of(service), json.dumps(notification("app-gone"))).status_code == 202
    wait_until(lambda: len(rx.captured) == 3, "three messages")
    feishu = rx.on("/feishu")[0].json()["card"]
    text = "\n".join(e["content"] for e in feishu["body"]["elements"] if e["tag"] == "markdown")
    assert "**原因**：driftguard 拒绝了本次渲染（shrink 检查未通过）：the render would prune 4 of 4" in text
    assert "values 键 **enabled** 本环境没有设置，沿用了 chart 默认值（templates/deployment.yaml:1）" in text
    assert feishu["header"]["template"] == "red"  # a protected kind would go
    urls = [e["behaviors"][0]["default_url"] for e in feishu["body"]["elements"] if e["tag"] == "button"]
    assert urls[1].endswith("/applications/argocd/app-gone?node=/PersistentVolumeClaim/shop/data/0")
    slack = "\n".join(
        b["text"]["text"] for b in rx.on("/slack")[0].json()["blocks"] if b["type"] == "section"
    )
    assert "*Cause*: render refused by driftguard (`shrink` guard)" in slack
    assert "gating key `enabled` relies on the chart default (`templates/deployment.yaml:1`)" in slack
    pd = rx.on("/pagerduty")[0].json()["payload"]
    assert pd["summary"].endswith("; render refused by driftguard (shrink)") and pd["severity"] == "critical"
    assert pd["custom_details"]["cause"]["gating"][0]["key"] == "enabled"
    assert "annotate" not in json.dumps(pd["custom_details"]["cause"])  # only the headline and the key lines

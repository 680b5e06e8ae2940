"""Every gate against local Argo CD and Prometheus stand-ins: decided verdicts are 200 JSON; the rest is not."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from flask import Flask

from analysis_provider.gates import GATES
from standins.argo_api import FakeArgo, application
from standins.prometheus import FakePrometheus
from tests.notifier.conftest import drill_app

from .conftest import get, make_app, sample


def body_of(resp) -> dict:  # type: ignore[no-untyped-def,type-arg]
    data = resp.get_json()
    assert resp.content_type.startswith("application/json")
    return data  # type: ignore[no-any-return]


# --- drift ------------------------------------------------------------------------------------


def test_drift_fails_naming_resource_path_and_actor(app: Flask, argo: FakeArgo) -> None:
    drill_app(argo)
    resp = get(app, "/v1/gates/drift?app=deepseek-inference")
    body = body_of(resp)
    assert (
        resp.status_code == 200
        and body["ok"] is False
        and body["verdict"] == "fail"
        and body["gate"] == "drift"
    )
    assert any(
        r.startswith(
            "Deployment.apps ai-serving/deepseek-inference: /spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu 2 -> 4 by kubectl-patch"
        )
        for r in body["reasons"]
    )
    assert body["observed"]["counts"]["human"] == 2 and body["checkedAt"].endswith("Z")
    assert "PLANTED" not in resp.get_data(as_text=True)


def test_drift_passes_when_only_suppressed_changes_remain(app: Flask, argo: FakeArgo) -> None:
    drill_app(argo, patched=False, secret_changed=False)
    body = body_of(get(app, "/v1/gates/drift?app=deepseek-inference"))
    assert (body["ok"], body["verdict"]) == (True, "pass")
    assert body["observed"]["suppressed"]["controller"] >= 1


def test_a_missing_application_is_a_decided_fail(app: Flask) -> None:
    for gate in ("drift", "sync", "freeze", "all"):
        resp = get(app, f"/v1/gates/{gate}?app=typo-in-template")
        body = body_of(resp)
        assert resp.status_code == 200 and body["ok"] is False and body["verdict"] == "fail", gate
        assert "application not found" in body["reasons"][0]


# --- sync ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sync", "health", "op", "verdict", "reason"),
    [
        ("Synced", "Healthy", None, "pass", "Synced and Healthy"),
        ("OutOfSync", "Healthy", None, "fail", "sync status is OutOfSync"),
        ("Synced", "Degraded", None, "fail", "health is Degraded"),
        ("Synced", "Healthy", "Running", "fail", "an operation is running"),
        ("Synced", "Healthy", "Failed", "fail", "the last operation failed"),
    ],
)
def test_sync(
    app: Flask, argo: FakeArgo, sync: str, health: str, op: str | None, verdict: str, reason: str
) -> None:
    a = application("shop", sync=sync, health=health)
    if op:
        a["status"]["operationState"] = {"phase": op, "message": "one or more objects failed to apply"}
    argo.put(a)
    body = body_of(get(app, "/v1/gates/sync?app=shop"))
    assert body["verdict"] == verdict and reason in body["reasons"][0]


# --- success-rate ------------------------------------------------------------------------------------


def test_success_rate_default_query_for_a_service(app: Flask, prom: FakePrometheus) -> None:
    body = body_of(get(app, "/v1/gates/success-rate?service=payment&window=2m"))
    assert (
        body["verdict"] == "pass"
        and body["observed"]["value"] == 0.995
        and body["observed"]["threshold"] == 0.99
    )
    assert (
        prom.queries[-1]
        == 'sum(rate(http_requests_total{service="payment",code!~"5.."}[2m])) / sum(rate(http_requests_total{service="payment"}[2m]))'
    )


@pytest.mark.parametrize(
    ("value", "verdict"), [("0.95", "fail"), (None, "inconclusive"), ("NaN", "inconclusive"), ("1", "pass")]
)
def test_success_rate_verdicts(app: Flask, prom: FakePrometheus, value: str | None, verdict: str) -> None:
    prom.value = value
    body = body_of(get(app, "/v1/gates/success-rate?service=payment&threshold=0.99"))
    assert body["verdict"] == verdict and body["ok"] is (verdict == "pass")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "needs argument(s) service"),
        ("query=sum(up)&service=y", "unknown argument(s) query"),
        ("service=a&template=nope", "unknown template 'nope'"),
        ("service=a&template=A%20B", "not a template name"),
        ("service=a b", "may hold letters"),
        ("service=a&threshold=2", "between 0 and 1"),
        ("service=a&threshold=abc", "not a number"),
        ("service=a&window=5 minutes", "must look like"),
        ("service=a&bogus=1", "unknown argument(s) bogus"),
    ],
)
def test_bad_arguments_are_400(app: Flask, query: str, message: str) -> None:
    resp = get(app, f"/v1/gates/success-rate?{query}")
    assert resp.status_code == 400 and message in body_of(resp)["error"]


def test_prometheus_faults_are_never_a_pass(app: Flask, prom: FakePrometheus) -> None:
    prom.status = 400
    assert get(app, "/v1/gates/success-rate?service=a").status_code == 502
    prom.status, prom.garbage = 200, True
    assert get(app, "/v1/gates/success-rate?service=a").status_code == 502
    # the stand-in answers after 1.5 s: a 504 is the gate's own deadline, which fired first
    prom.garbage, prom.delay = False, 1.5
    resp = get(app, "/v1/gates/success-rate?service=a")
    assert resp.status_code == 504
    assert "error" in body_of(resp)


def test_prometheus_down(argo: FakeArgo) -> None:
    app = make_app(argo)
    assert get(app, "/v1/gates/success-rate?service=a").status_code == 400  # not configured: says so
    from analysis_provider.app import create_app
    from analysis_provider.settings import AnalysisSettings
    from driftguard.argocd import ArgoCDSettings

    down = create_app(
        AnalysisSettings(
            token="t" * 20,
            redact_key=b"redact-key-for-tests-0123456789abcdef",
            prometheus_url="http://127.0.0.1:9",
            timeout=1,
            argocd=ArgoCDSettings(url=argo.url, token=argo.token),
        )
    )
    resp = get(down, "/v1/gates/success-rate?service=a", token="t" * 20)
    assert resp.status_code == 503 and "unreachable" in body_of(resp)["error"]


# --- freeze ------------------------------------------------------------------------------------------


def project(argo: FakeArgo, windows: list[dict]) -> None:  # type: ignore[type-arg]
    argo.projects["shop"] = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AppProject",
        "metadata": {"name": "shop", "namespace": "argocd"},
        "spec": {"syncWindows": windows},
    }
    a = application("checkout")
    a["spec"]["project"] = "shop"
    argo.put(a)


def test_freeze_inside_a_deny_window_in_its_time_zone(app: Flask, argo: FakeArgo) -> None:
    project(
        argo,
        [
            {
                "kind": "deny",
                "schedule": "0 22 * * *",
                "duration": "8h",
                "applications": ["*"],
                "timeZone": "Asia/Shanghai",
            }
        ],
    )
    body = body_of(get(app, "/v1/gates/freeze?app=checkout"))
    assert (
        body["verdict"] == "fail"
        and "inside the deny window '0 22 * * *' for 8:00:00 Asia/Shanghai" in body["reasons"][0]
    )
    project(
        argo, [{"kind": "deny", "schedule": "0 22 * * *", "duration": "8h", "applications": ["*"]}]
    )  # 22:00 UTC: not yet
    assert body_of(get(app, "/v1/gates/freeze?app=checkout"))["verdict"] == "pass"


def test_outside_every_allow_window_is_frozen(app: Flask, argo: FakeArgo) -> None:
    project(argo, [{"kind": "allow", "schedule": "0 9 * * 1-5", "duration": "8h", "namespaces": ["*"]}])
    body = body_of(get(app, "/v1/gates/freeze?app=checkout"))
    assert body["verdict"] == "fail" and body["reasons"][0].startswith("outside every allow window")
    project(argo, [{"kind": "allow", "schedule": "0 14 * * *", "duration": "2h", "namespaces": ["*"]}])
    assert body_of(get(app, "/v1/gates/freeze?app=checkout"))["verdict"] == "pass"
    project(argo, [{"kind": "deny", "schedule": "* * * * *", "duration": "1h", "applications": ["other-*"]}])
    assert body_of(get(app, "/v1/gates/freeze?app=checkout"))["verdict"] == "pass"  # does not match this app


def test_freeze_windows_from_our_config(argo: FakeArgo, tmp_path: Path) -> None:
    f = tmp_path / "freeze.yaml"
    f.write_text(
        "windows:\n- kind: deny\n  schedule: '0 0 29 11 *'\n  duration: 24h\n  applications: ['*']\n"
    )
    app = make_app(argo, freeze_file=str(f))
    argo.put(application("checkout"))
    body = body_of(get(app, "/v1/gates/freeze?app=checkout"))
    assert body["verdict"] == "fail" and "freeze file [0]" in body["reasons"][0]


# --- all, auth, faults ---------------------------------------------------------------------------------


def test_all_fails_if_any_fails_and_passes_when_all_pass(
    app: Flask, argo: FakeArgo, prom: FakePrometheus
) -> None:
    drill_app(argo, patched=False, secret_changed=False, sync="Synced")
    body = body_of(get(app, "/v1/gates/all?app=deepseek-inference&service=inference"))
    assert body["verdict"] == "pass" and body["observed"] == {
        "drift": "pass",
        "sync": "pass",
        "freeze": "pass",
        "success-rate": "pass",
    }
    prom.value = "0.5"
    body = body_of(get(app, "/v1/gates/all?app=deepseek-inference&service=inference"))
    assert body["verdict"] == "fail" and body["reasons"] == [
        "success-rate: success rate 0.5000 is below 0.99"
    ]
    prom.value = None
    assert (
        body_of(get(app, "/v1/gates/all?app=deepseek-inference&service=inference"))["verdict"]
        == "inconclusive"
    )


def test_all_is_an_error_when_nothing_failed_but_something_could_not_decide(
    app: Flask, argo: FakeArgo, prom: FakePrometheus
) -> None:
    drill_app(argo, patched=False, secret_changed=False, sync="Synced")
    prom.status = 500
    assert get(app, "/v1/gates/all?app=deepseek-inference&service=x").status_code == 502


def test_argo_cd_down_or_slow_is_an_error_within_the_timeout(app: Flask, argo: FakeArgo) -> None:
    drill_app(argo)
    argo.fail_with = 503
    resp = get(app, "/v1/gates/drift?app=deepseek-inference")
    assert resp.status_code == 503 and "error" in body_of(resp)
    # the stand-in answers after 1.5 s: a 504 is the gate's own deadline, which fired first
    argo.fail_with, argo.delay = None, 1.5
    assert get(app, "/v1/gates/sync?app=deepseek-inference").status_code == 504


def test_auth_unknown_gate_and_app_validation(app: Flask) -> None:
    assert get(app, "/v1/gates/sync?app=x", token="").status_code == 401
    assert get(app, "/v1/gates/sync?app=x", token="nope").status_code == 401
    resp = get(app, "/v1/gates/vibes?app=x")
    assert resp.status_code == 404 and ", ".join([*GATES, "all"]) in body_of(resp)["error"]
    assert "drift, sync, success-rate, freeze" in body_of(resp)["error"]  # the stock gates, in table order
    resp = get(app, "/v1/gates/sync?app={{args.app}}")
    assert resp.status_code == 400 and "substitute" in body_of(resp)["error"]
    assert get(app, "/v1/gates/sync").status_code == 400


def test_a_fleet_of_identical_requests_costs_one_lookup(argo: FakeArgo, prom: FakePrometheus) -> None:
    drill_app(argo)
    argo.delay = 0.3
    app = make_app(argo, prom, cache_ttl=5.0)
    before = sample(app, "driftguard_analysis_requests_total", gate="drift", outcome="fail")
    client_paths = ["/v1/gates/drift?app=deepseek-inference"] * 16
    with ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(lambda p: get(app, p).status_code, client_paths))
    assert statuses == [200] * 16
    app_calls = [r for r in argo.requests if r[0] == "/api/v1/applications/deepseek-inference"]
    assert len(app_calls) == 1
    assert len([r for r in argo.requests if r[0].endswith("/managed-resources")]) == 1
    after = sample(app, "driftguard_analysis_requests_total", gate="drift", outcome="fail")
    assert after - before == 16

"""The cases issue 13 found: upstreams that answer badly never make a gate pass, and every answer comes.

Each fault is played by a stand-in server (standins/faults.py); nothing of ours is patched. The
deadline (DRIFTGUARD_ANALYSIS_TIMEOUT, what Rollouts waits for) shows in the answer a late upstream
gets: a 504 where waiting would have passed. No test reads a clock (timing lives in bench/); waits
run in a daemon thread, so code that hangs fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from flask import Flask

from standins.argo_api import FakeArgo, application
from standins.faults import Fault
from standins.prometheus import FakePrometheus
from tests.notifier.conftest import drill_app

from .conftest import get, make_app, sample

TIMEOUT = 1.5
APP = "deepseek-inference"


def strict(text: str) -> Any:
    """JSON as Rollouts' parser reads it: NaN and Infinity are not JSON."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in an answer: not JSON")

    return json.loads(text, parse_constant=refuse)


HANG = 60.0
"""Only a guard against a hung test: what proves a deadline is the answer a late upstream gets (a 504
where waiting would have passed), never how long it took (timing lives in bench/)."""


def ask(app: Flask, path: str) -> tuple[int, dict[str, Any]]:
    """Status and strict-JSON body of one request; fails, without hanging, when none comes."""
    out: dict[str, Any] = {}

    def call() -> None:
        resp = get(app, path)
        out["r"] = (resp.status_code, strict(resp.get_data(as_text=True)))

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(HANG)
    assert "r" in out, f"{path}: no answer at all (a trickling upstream without a total deadline)"
    return out["r"]  # type: ignore[no-any-return]


@pytest.fixture
def passing(argo: FakeArgo, prom: FakePrometheus) -> Flask:
    """Every gate passes on these upstreams until a test breaks one of them."""
    drill_app(argo, patched=False, secret_changed=False, sync="Synced")
    app = make_app(argo, prom, timeout=TIMEOUT)
    for gate in ("drift", "sync", "freeze", "all"):
        status, body = ask(
            app, f"/v1/gates/{gate}?app={APP}&service=s" if gate == "all" else f"/v1/gates/{gate}?app={APP}"
        )
        assert (status, body["ok"]) == (200, True), gate
    return app


def test_managed_resources_as_an_array_is_502_not_a_pass(passing: Flask, argo: FakeArgo) -> None:
    argo.faults["managed-resources"] = Fault("body", body=[1, 2])
    status, body = ask(passing, f"/v1/gates/drift?app={APP}")
    assert status == 502 and "Argo CD" in body["error"] and "managed resources" in body["error"]
    assert "ok" not in body


@pytest.mark.parametrize(
    "items",
    [
        {"items": "none"},
        {"items": [1, 2]},
        # unreadable states: the drift engine would read both sides as absent, "in sync"
        {"items": [{"kind": "Deployment", "name": "x", "targetState": "{not json", "liveState": "{oops"}]},
        {"items": [{"kind": "Deployment", "name": "x", "targetState": {"a": 1}, "liveState": 7}]},
    ],
)
def test_managed_resources_of_the_wrong_shape_are_502(passing: Flask, argo: FakeArgo, items: Any) -> None:
    argo.faults["managed-resources"] = Fault("body", body=items)
    status, body = ask(passing, f"/v1/gates/drift?app={APP}")
    assert status == 502 and "managed resources" in body["error"]


@pytest.mark.parametrize(
    ("value", "shown"), [("+Inf", "+Inf"), ("-Inf", "-Inf"), ("1e9", "1e+09"), ("1.5", "1.5")]
)
def test_success_rate_infinite_or_out_of_range_is_502(
    passing: Flask, prom: FakePrometheus, value: str, shown: str
) -> None:
    prom.value = value
    status, body = ask(passing, "/v1/gates/success-rate?service=payment")
    # the value itself is never echoed (issue 31): it could answer a question nobody may ask
    assert status == 502 and "Prometheus" in body["error"] and shown not in body["error"]


@pytest.mark.parametrize("value", [True, 0.995, None])
def test_success_rate_sample_that_is_not_a_string_number(
    passing: Flask, prom: FakePrometheus, value: Any
) -> None:
    """Prometheus writes sample values as strings; a bare JSON bool or number is not its answer."""
    prom.fault = Fault(
        "body",
        body={
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, value]}]},
        },
    )
    status, body = ask(passing, "/v1/gates/success-rate?service=payment")
    assert status == 502 and "Prometheus" in body["error"]


def test_success_rate_matrix_and_non_strict_json_are_502(passing: Flask, prom: FakePrometheus) -> None:
    prom.result_type = "matrix"
    assert ask(passing, "/v1/gates/success-rate?service=payment")[0] == 502
    prom.result_type = "vector"
    prom.fault = Fault(
        "body",
        body={"status": "success", "data": {"resultType": "scalar", "result": [1, float("nan")]}},
    )  # json.dumps writes the literal NaN
    assert ask(passing, "/v1/gates/success-rate?service=payment")[0] == 502


def test_nan_is_inconclusive_and_written_as_a_string(passing: Flask, prom: FakePrometheus) -> None:
    prom.value = "NaN"
    status, body = ask(passing, "/v1/gates/success-rate?service=payment")
    assert (status, body["ok"], body["verdict"], body["observed"]["value"]) == (
        200,
        False,
        "inconclusive",
        "NaN",
    )
    prom.value, prom.result_type = "0.995", "scalar"
    status, body = ask(passing, "/v1/gates/success-rate?service=payment")
    assert (status, body["ok"], body["observed"]["value"]) == (200, True, 0.995)


@pytest.mark.parametrize(
    "answer",
    [
        {"metadata": {}},
        [1, 2],
        "Application",
        {"metadata": {"name": "other", "namespace": "argocd"}, "spec": {}, "status": {}},
        {"metadata": {"name": APP, "namespace": "elsewhere"}, "spec": {}, "status": {}},
        {"metadata": {"name": APP, "namespace": "argocd"}, "spec": {}},
        {"metadata": {"name": APP, "namespace": "argocd"}, "spec": {}, "status": "Synced"},
    ],
)
def test_an_answer_that_is_not_the_application_asked_for_is_502(
    passing: Flask, argo: FakeArgo, answer: Any
) -> None:
    argo.faults["application"] = Fault("body", body=answer)
    for gate in ("freeze", "sync", "drift", "all"):
        status, body = ask(passing, f"/v1/gates/{gate}?app={APP}")
        assert status == 502 and "Argo CD" in body["error"], (gate, body)


def test_application_parts_of_the_wrong_type_are_502(passing: Flask, argo: FakeArgo) -> None:
    a = application(APP)
    a["status"]["sync"] = "Synced"
    argo.faults["application"] = Fault("body", body=a)
    status, body = ask(passing, f"/v1/gates/sync?app={APP}")
    assert status == 502 and "status.sync" in body["error"]
    a = application(APP)
    a["spec"]["destination"] = "in-cluster"
    argo.faults["application"] = Fault("body", body=a)
    status, body = ask(passing, f"/v1/gates/freeze?app={APP}")
    assert status == 502 and "spec.destination" in body["error"]


@pytest.mark.parametrize(
    "spec",
    [
        {"syncWindows": "deny all night"},
        {"syncWindows": [1]},
        {
            "syncWindows": [
                {"kind": "deny", "schedule": "not a schedule", "duration": "1h", "applications": ["*"]}
            ]
        },
        {"syncWindows": [{"kind": "deny", "schedule": "0 22 * * *", "duration": "1h", "applications": "*"}]},
        {"syncWindows": [{"kind": "never", "schedule": "0 22 * * *", "duration": "1h"}]},
    ],
)
def test_sync_windows_that_do_not_parse_are_502(passing: Flask, argo: FakeArgo, spec: Any) -> None:
    argo.projects["default"] = {"metadata": {"name": "default", "namespace": "argocd"}, "spec": spec}
    status, body = ask(passing, f"/v1/gates/freeze?app={APP}")
    assert status == 502 and "syncWindows" in body["error"]


def test_an_app_project_that_is_not_the_one_asked_for_is_502(passing: Flask, argo: FakeArgo) -> None:
    argo.faults["project"] = Fault("body", body={"metadata": {}})
    assert ask(passing, f"/v1/gates/freeze?app={APP}")[0] == 502


@pytest.mark.slow  # a deadline per gate (the Prometheus one stays fast)
def test_a_trickling_argo_cd_is_504(passing: Flask, argo: FakeArgo) -> None:
    argo.faults["*"] = Fault("trickle", delay=1.0)
    for gate in ("sync", "drift", "freeze", "all"):
        status, body = ask(passing, f"/v1/gates/{gate}?app={APP}")
        assert status == 504 and "Argo CD" in body["error"], gate


def test_a_trickling_prometheus_is_504(passing: Flask, prom: FakePrometheus) -> None:
    prom.fault = Fault("trickle", delay=1.0)
    status, body = ask(passing, "/v1/gates/success-rate?service=payment")
    assert status == 504 and "Prometheus" in body["error"]


def test_all_shares_one_deadline_when_argo_cd_is_slow(passing: Flask, argo: FakeArgo) -> None:
    argo.faults["*"] = Fault("slow", delay=TIMEOUT + 2)
    status, body = ask(passing, f"/v1/gates/all?app={APP}&service=payment")
    assert status == 504 and "error" in body


def test_all_runs_its_gates_at_once(passing: Flask, argo: FakeArgo, prom: FakePrometheus) -> None:
    """Each upstream needs most of the deadline; one after another they would miss it, at once they pass."""
    argo.faults["project"] = Fault("slow", delay=TIMEOUT * 0.6)
    prom.fault = Fault("slow", delay=TIMEOUT * 0.6)
    status, body = ask(passing, f"/v1/gates/all?app={APP}&service=payment")
    # one after another they would take 1.2 x the deadline and answer 504: the pass is the proof
    assert (status, body["ok"]) == (200, True), body


@pytest.mark.parametrize(
    "fault", [Fault("html"), Fault("truncated"), Fault("cut"), Fault("reset"), Fault("status", 401)]
)
def test_argo_cd_garbage_is_never_a_pass(passing: Flask, argo: FakeArgo, fault: Fault) -> None:
    argo.faults["*"] = fault
    for gate in ("sync", "drift", "freeze", "all"):
        status, body = ask(passing, f"/v1/gates/{gate}?app={APP}")
        assert status in (502, 503) and "Argo CD" in body["error"], (gate, body)


def test_metrics_labels_never_come_from_the_request(passing: Flask) -> None:
    injected = 'x"} 1\ndriftguard_fake_metric{a="b'
    get(passing, "/v1/gates/junk-0?app=a")

    def series() -> list[str]:
        text = get(passing, "/metrics").get_data(as_text=True)
        return sorted(
            line.rsplit(" ", 1)[0] for line in text.splitlines() if line.startswith("driftguard_analysis")
        )

    before = series()
    unknown = sample(passing, "driftguard_analysis_requests_total", gate="unknown", outcome="404")
    for i in range(200):
        get(passing, f"/v1/gates/junk-{i}?app=a")
    get(passing, f"/v1/gates/{injected}?app=a")
    get(passing, f"/v1/gates/{injected}?app=a", token="")  # unauthenticated: 401, same label
    after = series()
    new = set(after) - set(before)  # the one 401 series of gate="unknown" (its _total and _created)
    assert set(before) <= set(after) and new <= {
        'driftguard_analysis_requests_total{gate="unknown",outcome="401"}',
        'driftguard_analysis_requests_created{gate="unknown",outcome="401"}',
    }
    assert "driftguard_fake_metric" not in get(passing, "/metrics").get_data(as_text=True)
    assert (
        sample(passing, "driftguard_analysis_requests_total", gate="unknown", outcome="404") - unknown == 201
    )
    assert all('gate="junk' not in s for s in after)


def test_openapi_names_every_gate_argument_and_both_schemas(passing: Flask) -> None:
    # a caller token opens the spec (issue 31); without one: 401, nothing listed
    assert get(passing, "/openapi.json", token="").status_code == 401
    spec = strict(get(passing, "/openapi.json").get_data(as_text=True))
    assert set(spec["paths"]) >= {
        f"/v1/gates/{g}" for g in ("drift", "sync", "success-rate", "freeze", "all")
    }
    params = {p["name"] for p in spec["paths"]["/v1/gates/all"]["get"]["parameters"]}
    assert params == {"app", "appNamespace", "template", "service", "threshold", "window"}
    responses = spec["paths"]["/v1/gates/drift"]["get"]["responses"]
    assert responses["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Verdict"
    }
    assert {"400", "401", "502", "503", "504"} <= set(responses)
    assert spec["components"]["schemas"]["Verdict"]["properties"]["ok"] == {
        "type": "boolean",
        "description": "true only for verdict pass",
    }
    assert spec["components"]["schemas"]["Error"]["required"] == ["error"]

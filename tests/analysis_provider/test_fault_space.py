"""Property: over Argo CD fault x Prometheus fault x gate, every answer comes, and is never a false pass.

The stand-ins play every fault (standins/faults.py); the baseline upstreams make every gate pass,
so ``ok: true`` must come back exactly when no upstream the gate reads misbehaved. Examples are
bounded (DRIFTGUARD_FAULT_EXAMPLES, default 40) and DRIFTGUARD_ANALYSIS_TIMEOUT is 1.5 s here, so
the run stays short on a shared machine; DRIFTGUARD_FAULT_LOG=path appends one JSON line per case.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis_provider.app import create_app
from analysis_provider.gates import GATES
from analysis_provider.settings import AnalysisSettings
from driftguard.argocd import ArgoCDSettings
from standins import argo_api, prometheus
from standins.argo_api import application
from standins.faults import Fault, refused_url
from tests.notifier.conftest import drill_app

from .conftest import NOW, TOKEN

pytestmark = pytest.mark.slow  # a fault space

TIMEOUT = 1.5
HANG = 60.0
"""Only a guard against a hung test: a late upstream's answer (an error where waiting would have
passed) proves the deadline, never how long it took (timing lives in bench/)."""
APP = "deepseek-inference"
ROUTES = ("application", "managed-resources", "project")
NEEDS: dict[str, tuple[set[str], str]] = {
    "drift": ({"application", "managed-resources"}, f"app={APP}"),
    "sync": ({"application"}, f"app={APP}"),
    "freeze": ({"application", "project"}, f"app={APP}"),
    "success-rate": ({"prometheus"}, "service=payment"),
    "all": ({*ROUTES, "prometheus"}, f"app={APP}&service=payment"),
}
"""What each gate reads, and a query it answers ``ok: true`` to while those upstreams are well
(every registered gate has a line: ``test_every_gate_has_a_line_in_needs``)."""

# faults any upstream can show (None: down, nothing listens)
COMMON: dict[str, Fault | None] = {
    "down": None,
    "reset": Fault("reset"),
    "slow": Fault("slow", delay=TIMEOUT + 1),
    "trickle": Fault("trickle", delay=1.0),
    "401": Fault("status", 401),
    "403": Fault("status", 403),
    "429": Fault("status", 429),
    "500": Fault("status", 500),
    "html": Fault("html", status=200),
    "html-502": Fault("html", status=502),
    "truncated": Fault("truncated"),
    "cut": Fault("cut"),
}
_ok_app = application(APP)
WRONG_SHAPES: dict[str, tuple[str, Any]] = {
    "app-array": ("application", [1, 2]),
    "app-empty-metadata": ("application", {"metadata": {}}),
    "app-other-name": ("application", application("other-app")),
    "app-other-namespace": ("application", application(APP, namespace="team-a")),
    "app-status-string": ("application", {**_ok_app, "status": "Healthy"}),
    "app-nan-literal": ("application", {**_ok_app, "spec": {**_ok_app["spec"], "x": float("nan")}}),
    "managed-array": ("managed-resources", [1, 2]),
    "managed-items-string": ("managed-resources", {"items": "none"}),
    "managed-state-garbage": (
        "managed-resources",
        {"items": [{"kind": "Deployment", "name": "x", "targetState": "{", "liveState": "{"}]},
    ),
    "project-array": ("project", [1]),
    "project-windows-string": (
        "project",
        {"metadata": {"name": "default", "namespace": "argocd"}, "spec": {"syncWindows": "deny"}},
    ),
    "project-window-bad": (
        "project",
        {
            "metadata": {"name": "default", "namespace": "argocd"},
            "spec": {"syncWindows": [{"kind": "deny", "schedule": "whenever", "duration": "1h"}]},
        },
    ),
}
PROM_VALUES: dict[str, Any] = {
    "NaN": "NaN",
    "+Inf": "+Inf",
    "-Inf": "-Inf",
    "1e9": "1e9",
    "bool": True,
    "number": 0.995,
    "empty-vector": None,
}


@st.composite
def argo_faults(draw: st.DrawFn) -> tuple[str, str | None, Any]:
    """(name, route it hits or None for every route, Fault | None for down)."""
    name = draw(st.sampled_from(["ok", *COMMON, *WRONG_SHAPES]))
    if name == "ok":
        return name, None, None
    if name in WRONG_SHAPES:
        route, body = WRONG_SHAPES[name]
        return name, route, Fault("body", body=body)
    if name == "down":
        return name, None, None
    return name, draw(st.sampled_from([None, *ROUTES])), COMMON[name]


PROM = st.sampled_from(["ok", *COMMON, *PROM_VALUES, "matrix", "nan-literal"])


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[argo_api.FakeArgo, prometheus.FakePrometheus]]:
    with argo_api.serve() as argo, prometheus.serve() as prom:
        drill_app(argo, patched=False, secret_changed=False, sync="Synced")
        yield argo, prom


def _answer(app: Any, path: str) -> tuple[int, Any]:
    out: dict[str, Any] = {}

    def call() -> None:
        resp = app.test_client().get(path, headers={"Authorization": f"Bearer {TOKEN}"})

        def refuse(name: str) -> Any:
            raise AssertionError(f"{name} in an answer: not JSON")

        out["r"] = (resp.status_code, json.loads(resp.get_data(as_text=True), parse_constant=refuse))

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(HANG)
    assert "r" in out, f"{path}: no answer at all (a trickling upstream without a total deadline)"
    return out["r"][0], out["r"][1]


@settings(
    max_examples=int(os.environ.get("DRIFTGUARD_FAULT_EXAMPLES", "40")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argo_fault=argo_faults(), prom_fault=PROM, gate=st.sampled_from(list(NEEDS)))
def test_every_answer_comes_and_is_never_a_false_pass(
    upstreams: tuple[argo_api.FakeArgo, prometheus.FakePrometheus],
    argo_fault: tuple[str, str | None, Any],
    prom_fault: str,
    gate: str,
) -> None:
    argo, prom = upstreams
    argo_name, route, fault = argo_fault
    argo.faults = {} if fault is None else {route or "*": fault}
    prom.value, prom.result_type, prom.fault = "0.995", "vector", None
    if prom_fault in COMMON and COMMON[prom_fault] is not None:
        prom.fault = COMMON[prom_fault]
    elif prom_fault in PROM_VALUES:
        prom.value = PROM_VALUES[prom_fault]
    elif prom_fault == "matrix":
        prom.result_type = "matrix"
    elif prom_fault == "nan-literal":
        prom.fault = Fault(
            "body", body={"status": "success", "data": {"resultType": "scalar", "result": [1, float("nan")]}}
        )
    app = create_app(
        AnalysisSettings(
            token=TOKEN,
            redact_key=b"redact-key-for-tests-0123456789abcdef",
            prometheus_url=refused_url() if prom_fault == "down" else prom.url,
            timeout=TIMEOUT,
            cache_ttl=0,
            argocd=ArgoCDSettings(url=refused_url() if argo_name == "down" else argo.url, token=argo.token),
        ),
        now=lambda: NOW,
    )
    try:
        status, body = _answer(app, f"/v1/gates/{gate}?{NEEDS[gate][1]}")
    finally:
        app.extensions["driftguard"]["pool"].shutdown(wait=False)
    hit = set(ROUTES) if argo_name != "ok" and route is None else ({route} if argo_name != "ok" else set())
    if prom_fault != "ok":
        hit.add("prometheus")
    well = not (hit & NEEDS[gate][0])
    if log := os.environ.get("DRIFTGUARD_FAULT_LOG"):
        with open(log, "a") as f:
            line = {"argo": argo_name, "route": route, "prom": prom_fault, "gate": gate, "status": status}
            f.write(json.dumps({**line, "ok": body.get("ok")}) + "\n")
    assert (status == 200 and body["ok"] is True) == well, (argo_name, route, prom_fault, gate, status, body)
    if status != 200:
        assert "error" in body and "ok" not in body


def test_every_gate_has_a_line_in_needs() -> None:
    """A gate left out of NEEDS would never meet a fault above: the property would pass without it."""
    missing = sorted({*GATES, "all"} - set(NEEDS))
    assert not missing, (
        f"add a line to NEEDS for {', '.join(missing)}: the upstreams it reads and a query it passes "
        "(docs/development.md, Add a gate)"
    )

"""The gate table is the one place a gate is registered: /openapi.json and ``all`` are derived from it.

A gate made here (one class, as a new module would hold) gets its operation, its summary and its
place in ``all`` without any other table: before, openapi.py raised KeyError for a gate without a
description entry and app.py named the gates of ``all`` by hand. The literal answers below are
for the four stock gates (``STOCK``), so registering a new gate needs no edit here.
"""

from __future__ import annotations

from typing import Any, ClassVar

from analysis_provider.gates import GATES, all_args, all_summary, in_all
from analysis_provider.gates.base import APP_ARGS, PASS, Arg, GateContext, Verdict
from analysis_provider.gates.drift import DriftGate
from analysis_provider.gates.freeze import FreezeGate
from analysis_provider.gates.success_rate import SuccessRateGate
from analysis_provider.gates.sync import SyncGate
from analysis_provider.openapi import spec

STOCK = {g.name: g for g in (DriftGate(), SyncGate(), SuccessRateGate(), FreezeGate())}
"""The gates driftguard ships, in table order; GATES holds them and any gate registered since."""


class RolloutAgeGate:
    """A gate as a new module would define it; it runs in ``all`` only when ``minAge`` is given."""

    name = "rollout-age"
    summary = "Pass once the Application's last sync is older than minAge."
    args: ClassVar[dict[str, Arg]] = {
        **APP_ARGS,
        "minAge": Arg(str, default="", description="How old the last sync must be"),
    }
    all_args = args
    all_when = ("minAge",)

    def evaluate(self, args: dict[str, Any], ctx: GateContext) -> Verdict:
        return Verdict(self.name, PASS)


def test_a_new_gate_is_in_the_document_with_its_own_summary_and_arguments() -> None:
    table = {**STOCK, "rollout-age": RolloutAgeGate()}
    doc = spec(table)
    op = doc["paths"]["/v1/gates/rollout-age"]["get"]
    assert op["summary"] == RolloutAgeGate.summary
    assert [p["name"] for p in op["parameters"]] == ["app", "appNamespace", "minAge"]
    every = doc["paths"]["/v1/gates/all"]["get"]
    assert "minAge" in [p["name"] for p in every["parameters"]]
    assert "rollout-age when minAge= is given" in every["summary"]
    assert "rollout-age" in doc["components"]["schemas"]["Verdict"]["properties"]["gate"]["enum"]


def test_the_registered_gates_summaries_come_from_their_classes() -> None:
    doc = spec()
    for name, gate in GATES.items():
        assert doc["paths"][f"/v1/gates/{name}"]["get"]["summary"] == gate.summary
    assert doc["paths"]["/v1/gates/all"]["get"]["summary"] == all_summary(GATES)
    assert all_summary(STOCK) == (
        "Every gate at once under one deadline (success-rate when template= or service= is given)."
    )


def test_all_runs_the_gates_it_always_runs_first_then_those_asked_for() -> None:
    app = {"app": "web", "appNamespace": ""}
    rate = {"template": "", "service": "web", "threshold": 0.99, "window": "5m"}
    assert in_all({**app, **rate, "service": None}, STOCK) == [("drift", app), ("sync", app), ("freeze", app)]
    assert in_all({**app, **rate}, STOCK) == [
        ("drift", app),
        ("sync", app),
        ("freeze", app),
        ("success-rate", rate),
    ]
    table = {"rollout-age": RolloutAgeGate(), **STOCK}
    asked = in_all({**app, **rate, "minAge": "1h"}, table)
    assert [name for name, _ in asked] == ["drift", "sync", "freeze", "rollout-age", "success-rate"]
    assert dict(asked)["rollout-age"] == {**app, "minAge": "1h"}


def test_all_accepts_every_gates_all_arguments_and_no_more() -> None:
    assert list(all_args(STOCK)) == ["app", "appNamespace", "template", "service", "threshold", "window"]
    assert "manualSync" not in all_args(GATES)  # freeze is asked as for an automated sync in `all`
    assert all_summary({"drift": GATES["drift"]}) == "Every gate at once under one deadline."

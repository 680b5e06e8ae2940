"""``/openapi.json``: built from the gate table itself, so every gate and argument it lists is real.

The verdict schema is what ``jsonPath: "{$.ok}"`` reads; the error schema is every non-2xx
answer (Rollouts counts those as an Error). Tests run schemathesis against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis_provider.gates import GATES
from analysis_provider.gates.base import APP_ARGS, Arg
from analysis_provider.gates.success_rate import SuccessRateGate

__all__ = ["spec"]

VERDICT: dict[str, Any] = {
    "type": "object",
    "required": ["ok", "verdict", "gate", "reasons", "observed", "checkedAt"],
    "properties": {
        "ok": {"type": "boolean", "description": "true only for verdict pass"},
        "verdict": {"type": "string", "enum": ["pass", "fail", "inconclusive"]},
        "gate": {"type": "string", "enum": [*GATES, "all"]},
        "reasons": {"type": "array", "items": {"type": "string"}},
        "observed": {
            "type": "object",
            "description": "what the gate read (per gate); strict JSON, non-finite numbers as strings",
            "additionalProperties": True,
        },
        "checkedAt": {"type": "string", "format": "date-time"},
    },
}
ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string", "description": "what could not be decided, naming the upstream"},
        "gate": {"type": "string"},
        "checkedAt": {"type": "string", "format": "date-time"},
    },
}
_ERRORS = {
    "400": "Bad or missing arguments",
    "401": "Missing or wrong bearer token",
    "403": "The caller's entry does not cover this Application (DRIFTGUARD_ANALYSIS_CALLERS)",
    "404": "No such gate",
    "502": "An upstream answered something the gate cannot read: could not decide",
    "503": "An upstream is unreachable: could not decide",
    "504": "An upstream did not answer within DRIFTGUARD_ANALYSIS_TIMEOUT: could not decide",
}
_DESCRIPTIONS = {
    "drift": "Fail while the Application has human, missing or prune-candidate changes.",
    "sync": "Pass only when the Application is Synced and Healthy and no operation runs or failed.",
    "success-rate": "A platform query template against a threshold; no data or NaN is inconclusive.",
    "freeze": "Fail inside a deny window of the app's AppProject syncWindows, or of the freeze file.",
    "all": "Every gate at once under one deadline (success-rate when template= or service= is given).",
}


def _parameters(args: Mapping[str, Arg]) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "in": "query",
            "required": arg.required,
            "description": arg.description,
            "schema": dict(arg.schema),
        }
        for name, arg in args.items()
    ]


def _gate(name: str, args: Mapping[str, Arg]) -> dict[str, Any]:
    json_of = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    return {
        "get": {
            "operationId": f"gate-{name}",
            "summary": _DESCRIPTIONS[name],
            "security": [{"bearer": []}],
            "parameters": _parameters(args),
            "responses": {
                "200": {
                    "description": "A decided verdict",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Verdict"}}},
                },
                **{code: {"description": text, "content": json_of} for code, text in _ERRORS.items()},
            },
        }
    }


def spec() -> dict[str, Any]:
    paths: dict[str, Any] = {f"/v1/gates/{name}": _gate(name, g.args) for name, g in GATES.items()}
    paths["/v1/gates/all"] = _gate("all", {**APP_ARGS, **SuccessRateGate.args})
    text = {"200": {"description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}}}
    json_error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}
    paths["/healthz"] = {"get": {"summary": "Liveness", "responses": ok}}
    paths["/readyz"] = {"get": {"summary": "Readiness: settings valid", "responses": ok}}
    unauthorized = {"401": {"description": "Missing or wrong bearer token", "content": json_error}}
    paths["/metrics"] = {
        "get": {
            "summary": "Prometheus metrics (text exposition; bearer token)",
            "responses": {**text, **unauthorized},
        }
    }
    paths["/openapi.json"] = {"get": {"summary": "This document", "responses": ok}}
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "driftguard analysis provider",
            "version": "1",
            "description": (
                "Argo Rollouts web metric gates. A decided verdict is HTTP 200 (read `{$.ok}`); any "
                "other status means the gate could not decide, which Rollouts counts as an Error."
            ),
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Verdict": VERDICT, "Error": ERROR},
        },
        "paths": paths,
    }

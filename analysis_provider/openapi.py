"""``/openapi.json``: built from the gate table itself, so every gate and argument it lists is real.

The verdict schema is what ``jsonPath: "{$.ok}"`` reads; the error schema is every non-2xx
answer (Rollouts counts those as an Error). Tests run schemathesis against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis_provider.gates import GATES, Gate, all_args, all_summary
from analysis_provider.gates.base import Arg

__all__ = ["spec"]


def _verdict(gates: Mapping[str, Gate]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["ok", "verdict", "gate", "reasons", "observed", "checkedAt"],
        "properties": {
            "ok": {"type": "boolean", "description": "true only for verdict pass"},
            "verdict": {"type": "string", "enum": ["pass", "fail", "inconclusive"]},
            "gate": {"type": "string", "enum": [*gates, "all"]},
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


def _gate(name: str, summary: str, args: Mapping[str, Arg]) -> dict[str, Any]:
    json_of = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    return {
        "get": {
            "operationId": f"gate-{name}",
            "summary": summary,
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


def spec(gates: Mapping[str, Gate] = GATES) -> dict[str, Any]:
    """The document for a gate table (the registered one; tests pass others)."""
    paths: dict[str, Any] = {f"/v1/gates/{name}": _gate(name, g.summary, g.args) for name, g in gates.items()}
    paths["/v1/gates/all"] = _gate("all", all_summary(gates), all_args(gates))
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
            "schemas": {"Verdict": _verdict(gates), "Error": ERROR},
        },
        "paths": paths,
    }

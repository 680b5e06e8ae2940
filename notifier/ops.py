"""Operating endpoints: /healthz, /readyz, /metrics (Prometheus text), /openapi.json."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from driftguard.service import bearer_matches
from notifier.journal.routes import OPENAPI_PATHS as _IDENTITY_PATHS
from notifier.whois import OPENAPI_PATHS as _WHOIS_PATHS

__all__ = ["OPENAPI", "bp"]

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


def _reads(state: Any) -> bool:
    """Whether the request carries the read token: only then do the probes say more than a word."""
    token = state.settings.read_token
    return bool(token) and bearer_matches(request.headers.get("Authorization", ""), token)


@bp.get("/readyz")
def readyz() -> tuple[Response, int]:
    # a probe answers with a status word only: channel names and store errors are for the read
    # token's holder (issue 31: any pod on the network read them)
    state = current_app.extensions["driftguard"]
    detail = _reads(state)
    if not state.outbox.writable():
        reason = f"the outbox is not writable ({state.outbox.write_error})"
        return jsonify({"status": "not ready", **({"reason": reason} if detail else {})}), 503
    return jsonify({"status": "ready", **({"channels": sorted(state.channels)} if detail else {})}), 200


@bp.get("/metrics")
def metrics() -> Response | tuple[Response, int]:
    state = current_app.extensions["driftguard"]
    # scraped with a bearer token like every endpoint but the probes: the webhook token, or the
    # read token (a Prometheus that can read should not be able to post notifications)
    if state.settings.auth == "token" and not bearer_matches(
        request.headers.get("Authorization", ""), state.settings.token, state.settings.read_token
    ):
        return jsonify({"error": "missing or wrong bearer token"}), 401
    body, content_type = state.metrics.text()
    return Response(body, content_type=content_type)


@bp.get("/openapi.json")
def openapi() -> Response | tuple[Response, int]:
    if not _reads(current_app.extensions["driftguard"]):
        return jsonify({"error": "missing or wrong read token (DRIFTGUARD_NOTIFIER_READ_TOKEN)"}), 401
    return jsonify(OPENAPI)


_ERROR = {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {
        "title": "driftguard notifier",
        "version": "1",
        "description": "Receives Argo CD Notifications webhooks and sends field-level drift alerts.",
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {"Error": _ERROR},
    },
    "paths": {
        "/v1/notifications": {
            "post": {
                "summary": "Accept an Argo CD notification (stored before the answer)",
                "security": [{"bearer": []}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["app"],
                                "properties": {
                                    "trigger": {"type": "string", "example": "on-drift-detected"},
                                    "app": {
                                        "type": "object",
                                        "required": ["metadata"],
                                        "properties": {
                                            "metadata": {
                                                "type": "object",
                                                "required": ["name"],
                                                "properties": {
                                                    "name": {"type": "string"},
                                                    "namespace": {"type": "string"},
                                                },
                                            },
                                            "spec": {"type": "object"},
                                            "status": {"type": "object"},
                                        },
                                    },
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "202": {
                        "description": "Stored",
                        "content": {
                            "application/json": {
                                "schema": {"type": "object", "properties": {"id": {"type": "string"}}}
                            }
                        },
                    },
                    "400": {
                        "description": "Not JSON or wrong shape",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    },
                    "401": {
                        "description": "Missing or wrong bearer token",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    },
                    "413": {
                        "description": "Body too large",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    },
                    "503": {
                        "description": "The outbox cannot be written: not stored, send again",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    },
                },
            }
        },
        "/healthz": {"get": {"summary": "Liveness", "responses": {"200": {"description": "Alive"}}}},
        "/readyz": {
            "get": {
                "summary": "Readiness: config valid, outbox writable (details with the read token)",
                "responses": {"200": {"description": "Ready"}, "503": {"description": "Not ready"}},
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics (bearer: the webhook or the read token)",
                "responses": {
                    "200": {"description": "Text exposition"},
                    "401": {"description": "Missing or wrong bearer token"},
                },
            }
        },
    },
}
OPENAPI["paths"].update(_IDENTITY_PATHS)  # issue 21: audit, admission, the journal
OPENAPI["paths"].update(_WHOIS_PATHS)  # issue 21: the drift gate asks who made a write
OPENAPI["components"]["securitySchemes"]["read"] = {
    "type": "http",
    "scheme": "bearer",
    "description": "the read token",
}

"""Operating endpoints: /healthz, /readyz, /metrics (Prometheus text), /openapi.json."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify

__all__ = ["OPENAPI", "bp"]

bp = Blueprint("ops", __name__)

_HELP = {
    "driftguard_notifier_received_total": (
        "counter",
        "Notifications received, by outcome (accepted, unauthorized, invalid).",
    ),
    "driftguard_notifier_expanded_total": ("counter", "Notifications expanded through Argo CD, by outcome."),
    "driftguard_notifier_sent_total": (
        "counter",
        "Message delivery attempts, by channel and outcome (sent, retry, dead).",
    ),
    "driftguard_notifier_dead_letters_total": ("counter", "Messages given up on, by channel."),
    "driftguard_notifier_deduplicated_total": (
        "counter",
        "Alerts not sent again within the dedup window, by channel.",
    ),
    "driftguard_notifier_delivery_seconds": (
        "histogram",
        "Seconds from webhook received to message delivered, by channel.",
    ),
}


@bp.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


@bp.get("/readyz")
def readyz() -> tuple[Response, int]:
    state = current_app.extensions["driftguard"]
    if not state.outbox.writable():
        return jsonify({"status": "not ready", "reason": "the outbox is not writable"}), 503
    return jsonify({"status": "ready", "channels": sorted(state.channels)}), 200


@bp.get("/metrics")
def metrics() -> Response:
    state = current_app.extensions["driftguard"]
    lines: list[str] = []
    seen: set[str] = set()
    for name, labels, value in state.outbox.metrics():
        if name.endswith("_probe"):
            continue
        base = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        if base not in seen and base in _HELP:
            kind, text = _HELP[base]
            lines += [f"# HELP {base} {text}", f"# TYPE {base} {kind}"]
            seen.add(base)
        lines.append(f"{name}{{{labels}}} {value:g}" if labels else f"{name} {value:g}")
    depth = state.outbox.depth()
    lines += [
        "# HELP driftguard_notifier_queue_depth Pending work in the outbox.",
        "# TYPE driftguard_notifier_queue_depth gauge",
    ]
    lines += [f'driftguard_notifier_queue_depth{{queue="{k}"}} {v}' for k, v in sorted(depth.items())]
    return Response("\n".join(lines) + "\n", mimetype="text/plain; version=0.0.4")


@bp.get("/openapi.json")
def openapi() -> Response:
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
                },
            }
        },
        "/healthz": {"get": {"summary": "Liveness", "responses": {"200": {"description": "Alive"}}}},
        "/readyz": {
            "get": {
                "summary": "Readiness: config valid, outbox writable",
                "responses": {"200": {"description": "Ready"}, "503": {"description": "Not ready"}},
            }
        },
        "/metrics": {
            "get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "Text exposition"}}}
        },
    },
}

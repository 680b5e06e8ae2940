"""``POST /v1/notifications``: authenticate, validate, persist, 202."""

from __future__ import annotations

import hmac
import json
import re
import time
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

__all__ = ["bp", "validate"]

bp = Blueprint("webhook", __name__)

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _error(status: int, message: str) -> tuple[Response, int]:
    return jsonify({"error": message}), status


def validate(body: Any) -> tuple[str, str, str]:
    """(app name, app namespace, trigger) of a notification body, or ValueError saying what is wrong."""
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object with `app` (and `trigger`)")
    trigger = body.get("trigger", "")
    if not isinstance(trigger, str) or len(trigger) > 253:
        raise ValueError("`trigger` must be a string (at most 253 characters)")
    app = body.get("app")
    if not isinstance(app, dict):
        raise ValueError("`app` must be an object (the Application, at least metadata.name)")
    meta = app.get("metadata")
    if not isinstance(meta, dict):
        raise ValueError("`app.metadata` must be an object with `name`")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("`app.metadata.name` is required")
    if not _NAME.match(name):
        raise ValueError("`app.metadata.name` is not a valid Kubernetes object name")
    namespace = meta.get("namespace") or ""
    if not isinstance(namespace, str) or (namespace and not _NAMESPACE.match(namespace)):
        raise ValueError("`app.metadata.namespace` is not a valid namespace")
    return name, namespace, trigger or "unknown"


@bp.post("/v1/notifications")
def receive() -> tuple[Response, int]:
    state = current_app.extensions["driftguard"]
    received_at = time.time()
    if state.settings.auth == "token":
        given = request.headers.get("Authorization", "")
        expected = f"Bearer {state.settings.token}"
        if not hmac.compare_digest(given.encode(), expected.encode()):
            state.outbox.count("driftguard_notifier_received_total", {"outcome": "unauthorized"})
            return _error(401, "missing or wrong bearer token")
    raw = request.get_data(cache=False)  # Argo CD may send no Content-Type: read the body as it is
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        state.outbox.count("driftguard_notifier_received_total", {"outcome": "invalid"})
        return _error(
            400, f"the body is not JSON ({type(exc).__name__} at position {getattr(exc, 'pos', '?')})"
        )
    try:
        name, namespace, trigger = validate(body)
    except ValueError as exc:
        state.outbox.count("driftguard_notifier_received_total", {"outcome": "invalid"})
        return _error(400, str(exc))
    nid = state.outbox.add_notification(
        body,
        app=name,
        app_namespace=namespace or state.settings.argocd.namespace,
        trigger=trigger,
        received_at=received_at,
    )
    state.worker.wake()  # this process's worker starts at once; the others find it by polling
    return jsonify({"id": nid}), 202

"""``POST /v1/notifications``: authenticate, validate, persist, 202."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from driftguard.errors import StoreUnavailable
from driftguard.service import bearer_matches
from notifier.logs import event

__all__ = ["TRIGGER_PREFIX", "bp", "canonical_trigger", "intake_key", "slim", "validate"]

TRIGGER_PREFIX = "driftguard-"
"""The shipped triggers are named ``driftguard-on-...`` so that none redefines one of Argo CD's
catalog (notifications_catalog/triggers: on-sync-failed, ...); the notifier works with the name
after the prefix, and a body from the earlier, unprefixed configuration means the same."""


def canonical_trigger(trigger: str) -> str:
    """``driftguard-on-drift-detected`` -> ``on-drift-detected``; any other name as it is."""
    return trigger[len(TRIGGER_PREFIX) :] if trigger.startswith(TRIGGER_PREFIX + "on-") else trigger


_VOLATILE = ("reconciledAt", "observedAt")
"""Status fields that change on every reconcile, not with the app's state: left out of the intake key."""

bp = Blueprint("webhook", __name__)

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
MAX_DEPTH = 64
"""Deepest JSON nesting accepted: an Application is a dozen levels deep; 100,000 is an attack."""


def _depth_ok(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """Nesting of a JSON text within ``limit``, counted on the bytes before parsing (strings skipped)."""
    depth = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x7B, 0x5B):
            depth += 1
            if depth > limit:
                return False
        elif byte in (0x7D, 0x5D):
            depth -= 1
    return True


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
    return name, namespace, canonical_trigger(trigger) or "unknown"


def slim(body: dict[str, Any]) -> dict[str, Any]:
    """The body as stored: of ``status.resources`` and the operation's ``syncResult.resources`` only
    the entries the worker may need when Argo CD's answer has moved on (not Synced, to prune, failed).

    The shipped templates send both lists whole (a Go template cannot filter them safely), which
    for an app of thousands of resources is megabytes; the outbox keeps a few KB of it.
    """
    app = body.get("app")
    status = app.get("status") if isinstance(app, dict) else None
    if not isinstance(app, dict) or not isinstance(status, dict):
        return body
    status = dict(status)
    if isinstance(status.get("resources"), list):
        status["resources"] = [
            r
            for r in status["resources"]
            if isinstance(r, dict) and (r.get("status") != "Synced" or r.get("requiresPruning") is True)
        ]
    op = status.get("operationState")
    result = op.get("syncResult") if isinstance(op, dict) else None
    if isinstance(op, dict) and isinstance(result, dict) and isinstance(result.get("resources"), list):
        kept = [
            r
            for r in result["resources"]
            if isinstance(r, dict)
            and (
                r.get("status") in ("SyncFailed", "PruneSkipped") or r.get("hookPhase") in ("Failed", "Error")
            )
        ]
        status["operationState"] = {**op, "syncResult": {**result, "resources": kept}}
    return {**body, "app": {**app, "status": status}}


def episode(body: dict[str, Any]) -> dict[str, Any]:
    """What tells one send of notifications-engine from the next: the Application's
    ``metadata.resourceVersion`` (a new one with every status write) and its operation's
    ``startedAt``/``finishedAt``. Empty for a body that carries none of them (the earlier templates)."""
    app = body.get("app")
    meta = app.get("metadata") if isinstance(app, dict) else None
    status = app.get("status") if isinstance(app, dict) else None
    op = status.get("operationState") if isinstance(status, dict) else None
    out: dict[str, Any] = {}
    if isinstance(meta, dict) and meta.get("resourceVersion"):
        out["resourceVersion"] = meta["resourceVersion"]
    if isinstance(op, dict):
        for key in ("startedAt", "finishedAt"):
            if op.get(key):
                out[key] = op[key]
    return out


def intake_key(body: dict[str, Any], name: str, namespace: str, trigger: str) -> str:
    """The idempotency key of a notification: app, trigger, the episode and the app's status fingerprint.

    notifications-engine sends each trigger once per episode (it records the send while the
    condition holds and forgets it when the condition turns false, pkg/controller/state.go), and
    its webhook client retries one send up to 3 times with the same rendered body
    (pkg/services/webhook.go, go-retryablehttp). So a retry, whichever replica takes it, is stored
    once; the next episode's send carries a new ``metadata.resourceVersion`` (and a new operation's
    times) and is a new notification. A body without ``status`` (a hand-made request) has no
    fingerprint: each one is a new notification ("").
    """
    status = body["app"].get("status")
    if not isinstance(status, dict) or not status:
        return ""
    sync = status.get("sync")
    revision = (sync.get("revision") or sync.get("revisions") or "") if isinstance(sync, dict) else ""
    stable = {k: v for k, v in status.items() if k not in _VOLATILE}
    raw = json.dumps([namespace, name, trigger, revision, episode(body), stable], sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


@bp.post("/v1/notifications")
def receive() -> tuple[Response, int]:
    state = current_app.extensions["driftguard"]
    received_at = time.time()
    if state.settings.auth == "token" and not bearer_matches(
        request.headers.get("Authorization", ""), state.settings.token
    ):
        state.metrics.received("unauthorized")
        return _error(401, "missing or wrong bearer token")
    raw = request.get_data(cache=False)  # Argo CD may send no Content-Type: read the body as it is
    if not _depth_ok(raw):
        state.metrics.received("invalid")
        return _error(400, f"the body is nested deeper than {MAX_DEPTH} levels")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        state.metrics.received("invalid")
        return _error(
            400, f"the body is not JSON ({type(exc).__name__} at position {getattr(exc, 'pos', '?')})"
        )
    try:
        name, namespace, trigger = validate(body)
    except ValueError as exc:
        state.metrics.received("invalid")
        return _error(400, str(exc))
    app_namespace = namespace or state.settings.argocd.namespace
    body = slim(body)
    try:
        nid, duplicate = state.outbox.add_notification(
            body,
            app=name,
            app_namespace=app_namespace,
            trigger=trigger,
            received_at=received_at,
            key=intake_key(body, name, app_namespace, trigger) if state.settings.intake_window else "",
            window=state.settings.intake_window,
            announce=False,  # below: the other processes are woken only if this one's worker is busy
        )
    except StoreUnavailable:
        # not stored, so not accepted: Argo CD sees the 503 and the pod turns not ready until a write succeeds
        state.metrics.received("unavailable")
        event(
            "outbox_write_failed",
            level=logging.ERROR,
            app=f"{namespace}/{name}",
            reason=state.outbox.write_error,
        )
        return _error(
            503, f"the outbox cannot be written ({state.outbox.write_error}); the notification was not stored"
        )
    if duplicate:
        # already stored (a retry, or a copy another replica took): accepted, not queued twice
        state.metrics.received("duplicate")
        return jsonify({"id": nid, "duplicate": True}), 202
    state.metrics.received("accepted")
    # this process's worker starts at once; when it is busy (a burst), the other replicas are woken
    # too (PostgreSQL: NOTIFY). Waking them all for every notification made six loops race for
    # one row on two cores, slowing the one that won. Polling stays the safety net.
    if not state.worker.wake():
        state.outbox.announce()
    return jsonify({"id": nid}), 202

"""``POST /v1/audit`` (the API server's audit webhook backend) and ``POST /v1/admission`` (observe-only).

Both feed the identity store (notifier/identity.py) with who wrote which object, never the bodies.

- ``/v1/audit`` takes an ``audit.k8s.io/v1`` EventList as kube-apiserver's webhook backend posts it
  (``--audit-webhook-config-file``; the kubeconfig's ``token`` is our bearer token). A body that is
  not an EventList is a 400; an item in it that is not an Event is skipped and counted, so one bad
  item never loses the rest of the batch. Reads and failed writes are not kept.
- ``/v1/admission`` answers every ``admission.k8s.io/v1`` AdmissionReview ``allowed: true`` with the
  request's UID, and records the write. It never blocks: a review it cannot parse is still allowed
  (and not recorded); only an unauthenticated or non-JSON post gets a 4xx, which the API server's
  ``failurePolicy: Ignore`` turns into "allowed" as well. Served over TLS by the second listener
  (docs/identity.md).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from driftguard.errors import StoreUnavailable
from driftguard.identity import IdentityEvent, from_admission, from_audit
from driftguard.service import bearer_matches
from notifier.logs import event
from notifier.webhook import MAX_DEPTH, _depth_ok
from notifier.witness import capture

__all__ = ["admission_bp", "bp"]

bp = Blueprint("audit", __name__)
admission_bp = Blueprint("admission", __name__)
"""``/v1/admission`` alone: the part the admission listener serves (``create_app(parts=("admission",))``)."""

MAX_ITEMS = 5000
"""Most Events in one batch (kube-apiserver's default --audit-webhook-batch-max-size is 400)."""


def _error(status: int, message: str) -> tuple[Response, int]:
    return jsonify({"error": message}), status


def _authorized(token: str) -> bool:
    return bearer_matches(request.headers.get("Authorization", ""), token)


def _json_body() -> Any:
    raw = request.get_data(cache=False)
    if not _depth_ok(raw):
        raise ValueError(f"the body is nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"the body is not JSON ({type(exc).__name__})") from exc


def _store(events: list[IdentityEvent], source: str) -> tuple[int, str]:
    state = current_app.extensions["driftguard"]
    try:
        return state.identities.add(events), ""
    except StoreUnavailable as exc:
        event("identity_write_failed", level=logging.ERROR, source=source, error=str(exc)[:200])
        return 0, "the identity store cannot be written"


@bp.post("/v1/audit")
def audit() -> tuple[Response, int]:
    state = current_app.extensions["driftguard"]
    if not state.settings.audit_token:
        return _error(404, "the audit webhook is off: set DRIFTGUARD_NOTIFIER_AUDIT_TOKEN")
    if not _authorized(state.settings.audit_token):
        state.metrics.identity("audit", "unauthorized")
        return _error(401, "missing or wrong bearer token")
    try:
        body = _json_body()
    except ValueError as exc:
        state.metrics.identity("audit", "invalid")
        return _error(400, str(exc))
    if (
        not isinstance(body, dict)
        or body.get("kind") != "EventList"
        or not isinstance(body.get("items"), list)
    ):
        state.metrics.identity("audit", "invalid")
        return _error(400, "the body must be an audit.k8s.io/v1 EventList with `items`")
    if not str(body.get("apiVersion", "")).startswith("audit.k8s.io/"):
        state.metrics.identity("audit", "invalid")
        return _error(400, "`apiVersion` must be audit.k8s.io/v1")
    items = body["items"]
    if len(items) > MAX_ITEMS:
        state.metrics.identity("audit", "invalid")
        return _error(413, f"a batch holds at most {MAX_ITEMS} events; lower --audit-webhook-batch-max-size")
    kept: list[IdentityEvent] = []
    skipped = 0
    for item in items:
        try:
            ev = from_audit(item)
        except ValueError:
            skipped += 1
            continue
        if ev is not None:
            kept.append(ev)
    stored, failure = _store(kept, "audit")
    if failure:
        state.metrics.identity("audit", "unavailable")
        return _error(503, f"{failure}; send the batch again")
    state.metrics.identity("audit", "accepted", stored)
    if skipped:
        state.metrics.identity("audit", "skipped", skipped)
    return jsonify({"received": len(items), "kept": len(kept), "stored": stored, "skipped": skipped}), 200


def _witness(state: Any, req: dict[str, Any]) -> None:
    """Keep the masked field diff of a person's write to an object Argo CD tracks (notifier/witness.py)."""
    try:
        witnessed = capture(req, redactor=state.redactor)
        if witnessed is not None:
            state.witnesses.add(witnessed)
            state.metrics.identity("admission", "witnessed")
    except Exception as exc:  # never block the cluster, never fail the answer over the witness
        event("witness_failed", level=logging.WARNING, error=type(exc).__name__)


@admission_bp.post("/v1/admission")
def admission() -> tuple[Response, int]:
    started = time.perf_counter()
    state = current_app.extensions["driftguard"]
    if state.settings.admission_auth == "token" and not _authorized(state.settings.audit_token):
        state.metrics.identity("admission", "unauthorized")
        return _error(401, "missing or wrong bearer token (or set DRIFTGUARD_NOTIFIER_ADMISSION_AUTH=none)")
    try:
        # no byte-by-byte depth scan here (it costs a large object a millisecond): json's own
        # RecursionError guards the parse, and only a handful of fields are read afterwards
        body = json.loads(request.get_data(cache=False))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        state.metrics.identity("admission", "invalid")
        return _error(400, f"the body is not JSON ({type(exc).__name__})")
    req = body.get("request") if isinstance(body, dict) else None
    uid = req.get("uid") if isinstance(req, dict) else None
    if not isinstance(uid, str) or not uid:
        state.metrics.identity("admission", "invalid")
        return _error(400, "the body must be an admission.k8s.io/v1 AdmissionReview with `request.uid`")
    answer = {
        "apiVersion": str(body.get("apiVersion") or "admission.k8s.io/v1")[:64],
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": True},
    }
    assert isinstance(req, dict)
    try:
        ev = from_admission(req)
    except ValueError:
        state.metrics.identity("admission", "skipped")
        return jsonify(answer), 200  # never block the cluster over a review we cannot read
    if ev is not None and ev.user and not state.recorder.record(ev):
        state.metrics.identity("admission", "dropped")
    if ev is not None and state.witnesses is not None and state.redactor is not None:
        _witness(state, req)
    resp = jsonify(answer)
    resp.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.3f}"
    return resp, 200

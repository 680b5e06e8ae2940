"""``GET /v1/incidents`` (JSON) and ``GET /incidents`` (a server-rendered page): the drift journal.

Reading needs the read token (``DRIFTGUARD_NOTIFIER_READ_TOKEN``, never the webhook token) as a
bearer header, or its cookie set by the page's own form, or the trusted header an authenticating
proxy sets (``DRIFTGUARD_NOTIFIER_READ_TRUSTED_HEADER``). The page has no external assets (inline
CSS, no script), so it works air-gapped behind ``kubectl port-forward``; values shown are the
masked ones the alerts carry, never Secret values.
"""

from __future__ import annotations

import math
import time
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, redirect, request

from driftguard.service import secret_matches
from notifier.journal.page import journal_page, message_page
from notifier.journal.store import summary
from notifier.read_access import COOKIE, cookie_value, denied, reader

__all__ = ["OPENAPI_PATHS", "bp", "openapi_error", "parse_since"]

bp = Blueprint("incidents", __name__)

UNREADABLE = "the drift journal cannot be read now (its database is unavailable); try again"
WEEK = 7 * 86400.0


def parse_since(value: str, *, now: float | None = None) -> float:
    """``since``: epoch seconds, RFC 3339, or a duration back from now (``90s``, ``30m``, ``24h``, ``7d``)."""
    from driftguard.identity import parse_time

    now = time.time() if now is None else now
    v = value.strip()
    if not v:
        return 0.0
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if v[-1] in units and v[:-1].isdigit():
        # a count past 10 digits is older than the epoch in any unit (400 digits overflowed a float: 500)
        if len(v[:-1]) > 10:
            raise ValueError("`since` is too far back: a duration has at most 10 digits")
        return max(0.0, now - int(v[:-1]) * units[v[-1]])
    try:
        number = float(v)
    except ValueError:
        pass
    else:
        if not math.isfinite(number):
            raise ValueError("`since` must be a finite number of epoch seconds")
        return number
    at = parse_time(v)
    if at is None:
        raise ValueError("`since` must be epoch seconds, RFC 3339 or a duration like 24h or 7d")
    return at


def _query() -> tuple[dict[str, Any], float]:
    since_raw = request.args.get("since", "")
    since = parse_since(since_raw) if since_raw else 0.0
    return {
        "app": request.args.get("app", "")[:253],
        "who": request.args.get("who", "")[:256],
        "since": since,
        "limit": min(max(int(request.args.get("limit", "500") or 500), 1), 5000),
    }, since


@bp.get("/v1/incidents")
def incidents_json() -> tuple[Response, int]:
    if reader() is None:
        return denied(page=False)
    try:
        q, _ = _query()
    except ValueError as exc:
        return jsonify({"error": str(exc)}), 400
    state = current_app.extensions["driftguard"]
    try:
        episodes = state.journal.episodes(**q)
    except state.outbox.errors:
        return jsonify({"error": UNREADABLE}), 503
    return jsonify({"episodes": episodes, "summary": summary(episodes)}), 200


@bp.post("/incidents/login")
def login() -> Any:
    s = current_app.extensions["driftguard"].settings
    given = request.form.get("token", "")
    if not secret_matches(given, s.read_token):
        return denied(page=True)
    resp = redirect("/incidents", code=303)
    resp.set_cookie(
        COOKIE, cookie_value(s.read_token), httponly=True, samesite="Strict", secure=request.is_secure
    )
    return resp


@bp.get("/incidents")
def incidents_page() -> tuple[Response, int]:
    if reader() is None:
        return denied(page=True)
    try:
        q, _ = _query()
    except ValueError as exc:
        if "text/html" not in request.headers.get("Accept", ""):  # a script, not a browser: JSON
            return jsonify({"error": str(exc)}), 400
        return Response(message_page(str(exc)), mimetype="text/html"), 400
    state = current_app.extensions["driftguard"]
    try:
        episodes = state.journal.episodes(**q)
        week = state.journal.episodes(since=time.time() - WEEK, limit=5000)
    except state.outbox.errors:
        return Response(message_page(UNREADABLE), mimetype="text/html"), 503
    page = journal_page(q, request.args.get("since", ""), summary(week), episodes)
    return Response(page, mimetype="text/html"), 200


def openapi_error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


_EPISODE = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "app": {"type": "string", "description": "namespace/name of the Application"},
        "classes": {"type": "array", "items": {"type": "string"}},
        "severity": {"type": "string"},
        "who": {"type": "string", "description": "the person, else the field manager"},
        "user": {"type": "string", "description": "the person from an audit or admission record, or empty"},
        "field_manager": {"type": "string"},
        "actor": {"type": "string", "example": "alice@example.com via kubectl-patch, 14:02:07 (3 min ago)"},
        "changes": {
            "type": "array",
            "items": {"type": "object"},
            "description": "values masked as in alerts",
        },
        "changed_at": {"type": "string", "format": "date-time"},
        "notified_at": {"type": "string", "format": "date-time"},
        "alerted_at": {"type": "object", "additionalProperties": {"type": "string", "format": "date-time"}},
        "healed_at": {"type": "string", "format": "date-time", "nullable": True},
        "healed_by": {"type": "string", "enum": ["self-heal", "sync", ""]},
        "open": {"type": "boolean"},
        "durations_ms": {"type": "object"},
    },
}
OPENAPI_PATHS: dict[str, Any] = {
    "/v1/incidents": {
        "get": {
            "summary": "The drift journal: episodes from change to heal, newest first, and their summary",
            "security": [{"read": []}],
            "parameters": [
                {
                    "name": "app",
                    "in": "query",
                    "schema": {"type": "string"},
                    "description": "name or namespace/name",
                },
                {
                    "name": "since",
                    "in": "query",
                    "schema": {"type": "string"},
                    "description": "epoch, RFC 3339 or 24h/7d",
                },
                {
                    "name": "who",
                    "in": "query",
                    "schema": {"type": "string"},
                    "description": "person or field manager",
                },
                {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 5000}},
            ],
            "responses": {
                "200": {
                    "description": "Episodes",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "episodes": {"type": "array", "items": _EPISODE},
                                    "summary": {"type": "object"},
                                },
                            }
                        }
                    },
                },
                "400": openapi_error("A bad `since`"),
                "401": openapi_error("Missing or wrong read token"),
                "403": openapi_error("Reading is off (no read token or trusted header configured)"),
                "503": openapi_error("The journal's database is unavailable: try again"),
            },
        }
    },
    "/incidents": {
        "get": {
            "summary": "The drift journal as a page (no external assets)",
            "security": [{"read": []}],
            "responses": {
                "200": {"description": "HTML"},
                "400": {"description": "A bad `since`"},
                "401": {"description": "A token form"},
                "403": {"description": "Reading is off (no read token or trusted header configured)"},
                "503": {"description": "The journal's database is unavailable"},
            },
        }
    },
    "/v1/audit": {
        "post": {
            "summary": "kube-apiserver's audit webhook backend: an audit.k8s.io/v1 EventList (metadata kept, bodies never)",
            "security": [{"bearer": []}],
            "responses": {
                "200": {"description": "received, kept, stored (new), skipped (not Events) counts"},
                "400": openapi_error("Not JSON, or not an EventList"),
                "401": openapi_error("Missing or wrong bearer token"),
                "404": openapi_error("The audit webhook is off"),
                "413": openapi_error("Body or batch too large"),
                "503": openapi_error("The identity store cannot be written: send again"),
            },
        }
    },
    "/v1/admission": {
        "post": {
            "summary": "Observe-only admission webhook: every AdmissionReview is allowed; the write is recorded",
            "responses": {
                "200": {"description": "AdmissionReview with response.allowed true"},
                "400": openapi_error("Not JSON or no request.uid"),
                "401": openapi_error(
                    "Missing or wrong bearer token (DRIFTGUARD_NOTIFIER_ADMISSION_AUTH=token)"
                ),
            },
        }
    },
}

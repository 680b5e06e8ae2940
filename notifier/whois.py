"""``POST /v1/identities/match``: who made these writes, for a reader outside the notifier (the drift gate).

The analysis provider has the drift (from Argo CD) but not the identity store; the notifier has
the store. A caller sends the writes it sees, each as the managedFields entry names it (object,
UID, resourceVersion, field manager, time), and gets back, in the same order, the person whose
audit or admission record matches by the one join rule (``driftguard.identity.best_match``), or
``null``. Only the person, the record's source and its time leave: never groups, source IPs or
user agents. Reading needs the read token, as the journal does (notifier/read_access.py).

Bounded both ways: at most ``MAX_WRITES`` writes per question (the body itself is capped by
``DRIFTGUARD_NOTIFIER_MAX_BODY_BYTES``), so an answer is at most a few tens of KB.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from driftguard.identity import best_match, parse_time
from notifier.journal.routes import openapi_error
from notifier.logs import event
from notifier.read_access import denied, reader

__all__ = ["MAX_WRITES", "OPENAPI_PATHS", "bp"]

bp = Blueprint("whois", __name__)

MAX_WRITES = 100
"""Writes in one question: a gate asks about the changes it shows (10), an alert about its resources."""
_LIMITS = {
    "group": 253,
    "kind": 63,
    "namespace": 63,
    "name": 253,
    "uid": 64,
    "resourceVersion": 64,
    "manager": 128,
}
_REQUIRED = ("kind", "name", "manager")


def _error(status: int, message: str) -> tuple[Response, int]:
    return jsonify({"error": message}), status


def _write(raw: Any, n: int) -> dict[str, Any]:
    """One write of the question, checked; ValueError naming ``writes[n]`` and the field."""
    if not isinstance(raw, dict):
        raise ValueError(f"writes[{n}] must be an object")
    unknown = sorted(set(raw) - {*_LIMITS, "time"})
    if unknown:
        raise ValueError(f"writes[{n}] has unknown field(s) {', '.join(unknown)[:120]}")
    out: dict[str, Any] = {}
    for key, limit in _LIMITS.items():
        value = raw.get(key, "")
        if not isinstance(value, str) or len(value) > limit:
            raise ValueError(f"writes[{n}].{key} must be a string of at most {limit} characters")
        if key in _REQUIRED and not value:
            raise ValueError(f"writes[{n}].{key} is required")
        out[key] = value
    at = raw.get("time")
    if at is not None and (not isinstance(at, str) or parse_time(at) is None):
        raise ValueError(f"writes[{n}].time must be an RFC 3339 time (the managedFields entry's) or null")
    out["time"] = parse_time(at)
    return out


def _question() -> list[dict[str, Any]]:
    try:
        body = json.loads(request.get_data(cache=False))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"the body is not JSON ({type(exc).__name__})") from exc
    writes = body.get("writes") if isinstance(body, dict) else None
    if not isinstance(writes, list):
        raise ValueError("the body must be an object with `writes`: a list of writes")
    if len(writes) > MAX_WRITES:
        raise OverflowError(f"at most {MAX_WRITES} writes per question")
    return [_write(w, n) for n, w in enumerate(writes)]


@bp.post("/v1/identities/match")
def match() -> tuple[Response, int]:
    if reader() is None:
        return denied(page=False)
    try:
        writes = _question()
    except OverflowError as exc:
        return _error(413, str(exc))
    except ValueError as exc:
        return _error(400, str(exc))
    store = current_app.extensions["driftguard"].identities
    matches: list[dict[str, Any] | None] = []
    seen: dict[tuple[str, str, str], Any] = {}
    try:
        for w in writes:
            key = (w["namespace"], w["name"], w["uid"])
            if key not in seen:
                seen[key] = store.candidates(namespace=w["namespace"], name=w["name"], uid=w["uid"])
            ev = best_match(
                seen[key],
                group=w["group"],
                kind=w["kind"],
                namespace=w["namespace"],
                name=w["name"],
                uid=w["uid"],
                resource_version=w["resourceVersion"],
                manager=w["manager"],
                time=w["time"],
            )
            matches.append(None if ev is None else {"user": ev.user, "source": ev.source, "at": ev.at})
    except Exception as exc:  # the store's own error type depends on its database
        event("identity_read_failed", level=logging.ERROR, error=type(exc).__name__)
        return _error(503, "the identity store cannot be read; ask again")
    return jsonify({"matches": matches}), 200


_WRITE_SCHEMA = {
    "type": "object",
    "required": list(_REQUIRED),
    "additionalProperties": False,
    "properties": {
        **{k: {"type": "string", "maxLength": v} for k, v in _LIMITS.items()},
        "kind": {"type": "string", "minLength": 1, "maxLength": _LIMITS["kind"]},
        "name": {"type": "string", "minLength": 1, "maxLength": _LIMITS["name"]},
        "manager": {"type": "string", "minLength": 1, "maxLength": _LIMITS["manager"]},
        "time": {
            "type": "string",
            "format": "date-time",
            "nullable": True,
            "description": "the managedFields entry's time (RFC 3339); null matches by resourceVersion only",
        },
    },
}
OPENAPI_PATHS: dict[str, Any] = {
    "/v1/identities/match": {
        "post": {
            "summary": "Who made these writes: the person whose audit or admission record matches each "
            "(the join rule of docs/identity.md), in order, or null",
            "security": [{"read": []}],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["writes"],
                            "properties": {
                                "writes": {"type": "array", "maxItems": MAX_WRITES, "items": _WRITE_SCHEMA}
                            },
                        }
                    }
                },
            },
            "responses": {
                "200": {
                    "description": "One entry per write, in order: the match, or null",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["matches"],
                                "properties": {
                                    "matches": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "nullable": True,
                                            "required": ["user", "source", "at"],
                                            "properties": {
                                                "user": {"type": "string"},
                                                "source": {"type": "string", "enum": ["audit", "admission"]},
                                                "at": {"type": "number", "description": "epoch seconds"},
                                            },
                                        },
                                    }
                                },
                            }
                        }
                    },
                },
                "400": openapi_error("Not JSON, or a write of the wrong shape"),
                "401": openapi_error("Missing or wrong read token"),
                "403": openapi_error("Reading is off (no read token or trusted header configured)"),
                "413": openapi_error("More writes than one question may hold, or the body is too large"),
                "503": openapi_error("The identity store cannot be read: ask again"),
            },
        }
    }
}

"""``GET /v1/incidents`` (JSON) and ``GET /incidents`` (a server-rendered page): the drift journal.

Reading needs the read token (``DRIFTGUARD_NOTIFIER_READ_TOKEN``, never the webhook token) as a
bearer header, or its cookie set by the page's own form, or the trusted header an authenticating
proxy sets (``DRIFTGUARD_NOTIFIER_READ_TRUSTED_HEADER``). The page has no external assets (inline
CSS, no script), so it works air-gapped behind ``kubectl port-forward``; values shown are the
masked ones the alerts carry, never Secret values.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, redirect, request
from markupsafe import escape

from driftguard.service import bearer_matches, secret_matches
from notifier.journal import summary

__all__ = ["bp", "parse_since"]

bp = Blueprint("incidents", __name__)

COOKIE = "driftguard_read"
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


def _cookie_value(token: str) -> str:
    return hashlib.sha256(b"driftguard-read\0" + token.encode()).hexdigest()


def _reader() -> str | None:
    """Who is reading ("token", "cookie" or the proxy's user), or None when not allowed."""
    s = current_app.extensions["driftguard"].settings
    if s.read_trusted_header:
        user = request.headers.get(s.read_trusted_header, "")
        if user:
            return user[:128]
    if s.read_token:
        if bearer_matches(request.headers.get("Authorization", ""), s.read_token):
            return "token"
        cookie = request.cookies.get(COOKIE, "")
        if secret_matches(cookie, _cookie_value(s.read_token)):
            return "cookie"
    return None


def _denied(page: bool) -> tuple[Response, int]:
    s = current_app.extensions["driftguard"].settings
    if not s.read_token and not s.read_trusted_header:
        message = "reading the journal is off: set DRIFTGUARD_NOTIFIER_READ_TOKEN or _READ_TRUSTED_HEADER"
        status = 403
    else:
        message = "missing or wrong read token"
        status = 401
    if page:
        form = (
            '<form method="post" action="/incidents/login"><label>Read token '
            '<input type="password" name="token" autocomplete="off"></label> <button>Open</button></form>'
            if s.read_token
            else ""
        )
        return Response(
            _page("Drift journal", f"<p>{escape(message)}</p>{form}"), mimetype="text/html"
        ), status
    return jsonify({"error": message}), status


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
    if _reader() is None:
        return _denied(page=False)
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
        return _denied(page=True)
    resp = redirect("/incidents", code=303)
    resp.set_cookie(
        COOKIE, _cookie_value(s.read_token), httponly=True, samesite="Strict", secure=request.is_secure
    )
    return resp


@bp.get("/incidents")
def incidents_page() -> tuple[Response, int]:
    if _reader() is None:
        return _denied(page=True)
    try:
        q, _ = _query()
    except ValueError as exc:
        if "text/html" not in request.headers.get("Accept", ""):  # a script, not a browser: JSON
            return jsonify({"error": str(exc)}), 400
        return Response(_page("Drift journal", f"<p>{escape(str(exc))}</p>"), mimetype="text/html"), 400
    state = current_app.extensions["driftguard"]
    try:
        episodes = state.journal.episodes(**q)
        week = state.journal.episodes(since=time.time() - WEEK, limit=5000)
    except state.outbox.errors:
        return Response(_page("Drift journal", f"<p>{escape(UNREADABLE)}</p>"), mimetype="text/html"), 503
    body = _filters(q) + _stats(summary(week)) + _list(episodes)
    return Response(_page("Drift journal", body), mimetype="text/html"), 200


# --- rendering: plain HTML, every value escaped -----------------------------------------------------

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#1b1f24;background:#fafbfc}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.5rem}
table{border-collapse:collapse;width:100%}td,th{padding:.35rem .5rem;border-bottom:1px solid #e1e4e8;text-align:left;vertical-align:top}
.stats{display:flex;gap:2rem;flex-wrap:wrap}.stats div{background:#fff;border:1px solid #e1e4e8;padding:.6rem 1rem;border-radius:6px}
.bar{position:relative;height:14px;background:#eef1f4;border-radius:7px;min-width:240px}
.seg{position:absolute;top:0;height:14px}.s1{background:#f0b429;border-radius:7px 0 0 7px}.s2{background:#2f80ed}
.open{background:repeating-linear-gradient(45deg,#f7c6c6,#f7c6c6 4px,#fbe3e3 4px,#fbe3e3 8px)}
.legend span{display:inline-block;width:10px;height:10px;margin:0 .3rem 0 1rem}
code{font-size:12px;background:#f0f2f4;padding:0 .2rem}
"""


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>"
    )


def _filters(q: dict[str, Any]) -> str:
    return (
        '<form method="get" action="/incidents" id="filters">'
        f'<label>App <input name="app" value="{escape(q["app"])}"></label> '
        f'<label>Person <input name="who" value="{escape(q["who"])}"></label> '
        f'<label>Since <input name="since" placeholder="7d" value="{escape(request.args.get("since", ""))}"></label> '
        "<button>Filter</button></form>"
    )


def _dur(ms: int | None) -> str:
    if ms is None:
        return "–"
    if ms < 1000:
        return f"{ms} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    if ms < 7_200_000:
        return f"{ms / 60000:.0f} min"
    return f"{ms / 3_600_000:.1f} h"


def _stats(s: dict[str, Any]) -> str:
    people = "".join(f"<li>{escape(p['who'])}: {p['episodes']}</li>" for p in s["top_people"]) or "<li>–</li>"
    fields = (
        "".join(f"<li><code>{escape(f['field'])}</code>: {f['episodes']}</li>" for f in s["top_fields"])
        or "<li>–</li>"
    )
    return (
        '<h2>Last 7 days</h2><div class="stats" id="stats">'
        f"<div>Episodes<br><b>{s['episodes']}</b></div>"
        f'<div>Median time to alert<br><b id="median-alert">{_dur(s["median_to_alert_ms"])}</b></div>'
        f'<div>Median time to heal<br><b id="median-heal">{_dur(s["median_to_heal_ms"])}</b></div>'
        f'<div>Top people<ol id="top-people">{people}</ol></div>'
        f'<div>Top drifted fields<ol id="top-fields">{fields}</ol></div></div>'
    )


def _bar(e: dict[str, Any]) -> str:
    """changed -> first alert (amber) -> healed (blue); an open episode's rest is hatched up to now."""
    t = e["times"]
    start = t["changed"]
    first = min(t["alerted"].values()) if t["alerted"] else None
    end = t["healed"] or time.time()
    span = max(end - start, 1e-3)
    alert_pct = 100.0 * ((first or end) - start) / span
    title = f"changed → alerted {_dur(e['durations_ms']['to_alert'])} → healed {_dur(e['durations_ms']['to_heal'])}"
    rest = "s2" if t["healed"] else "s2 open"
    return (
        f'<div class="bar timeline" title="{escape(title)}" data-to-alert-ms="{e["durations_ms"]["to_alert"] or ""}"'
        f' data-to-heal-ms="{e["durations_ms"]["to_heal"] or ""}">'
        f'<div class="seg s1 to-alert" style="left:0;width:{alert_pct:.2f}%"></div>'
        f'<div class="seg {rest} to-heal" style="left:{alert_pct:.2f}%;width:{100 - alert_pct:.2f}%"></div></div>'
        f"<small>{escape(title)}</small>"
    )


def _list(episodes: list[dict[str, Any]]) -> str:
    if not episodes:
        return "<h2>Episodes</h2><p>No drift episode matches.</p>"
    rows = []
    for e in episodes:
        changes = "<br>".join(
            f"{escape(c['kind'])} {escape(c['name'])} <code>{escape(c['path'] or '(whole object)')}</code>"
            f" {escape(str(c['old']))} → {escape(str(c['new']))}"
            for c in e["changes"][:5]
        )
        more = f"<br>… {len(e['changes']) - 5} more" if len(e["changes"]) > 5 else ""
        channels = ", ".join(f"{escape(ch)} {escape(at or '')}" for ch, at in e["alerted_at"].items()) or "–"
        rows.append(
            f'<tr class="episode" id="ep-{escape(e["id"])}"><td><b>{escape(e["app"])}</b><br>'
            f"<small>{escape(', '.join(e['classes']))}</small></td>"
            f'<td class="who">{escape(e["actor"])}</td><td>{changes}{more}</td>'
            f"<td>{_bar(e)}<br><small>changed {escape(e['changed_at'] or '')}<br>alerted {channels}<br>"
            f"healed {escape(e['healed_at'] or 'not yet')} {escape(e['healed_by'])}</small></td></tr>"
        )
    legend = '<p class="legend"><span class="s1"></span>changed → alerted<span class="s2"></span>alerted → healed</p>'
    return (
        f"<h2>Episodes</h2>{legend}<table><thead><tr><th>App</th><th>Who</th><th>Changes</th><th>Timeline</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _err(description: str) -> dict[str, Any]:
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
                "400": _err("A bad `since`"),
                "401": _err("Missing or wrong read token"),
                "403": _err("Reading is off (no read token or trusted header configured)"),
                "503": _err("The journal's database is unavailable: try again"),
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
                "400": _err("Not JSON, or not an EventList"),
                "401": _err("Missing or wrong bearer token"),
                "404": _err("The audit webhook is off"),
                "413": _err("Body or batch too large"),
                "503": _err("The identity store cannot be written: send again"),
            },
        }
    },
    "/v1/admission": {
        "post": {
            "summary": "Observe-only admission webhook: every AdmissionReview is allowed; the write is recorded",
            "responses": {
                "200": {"description": "AdmissionReview with response.allowed true"},
                "400": _err("Not JSON or no request.uid"),
                "401": _err("Missing or wrong bearer token (DRIFTGUARD_NOTIFIER_ADMISSION_AUTH=token)"),
            },
        }
    },
}

"""Who may read the journal and the identity matches: the read token (bearer or the page's cookie)
or the trusted header an authenticating proxy sets (``DRIFTGUARD_NOTIFIER_READ_TRUSTED_HEADER``)."""

from __future__ import annotations

import hashlib

from flask import Response, current_app, jsonify, request

from driftguard.service import bearer_matches, secret_matches
from notifier.journal.page import message_page

__all__ = ["COOKIE", "cookie_value", "denied", "reader"]

COOKIE = "driftguard_read"


def cookie_value(token: str) -> str:
    return hashlib.sha256(b"driftguard-read\0" + token.encode()).hexdigest()


def reader() -> str | None:
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
        if secret_matches(cookie, cookie_value(s.read_token)):
            return "cookie"
    return None


def denied(page: bool) -> tuple[Response, int]:
    s = current_app.extensions["driftguard"].settings
    if not s.read_token and not s.read_trusted_header:
        message = "reading the journal is off: set DRIFTGUARD_NOTIFIER_READ_TOKEN or _READ_TRUSTED_HEADER"
        status = 403
    else:
        message = "missing or wrong read token"
        status = 401
    if page:
        return Response(message_page(message, login_form=bool(s.read_token)), mimetype="text/html"), status
    return jsonify({"error": message}), status

"""PagerDuty Events API v2: ``trigger`` with a stable ``dedup_key`` per app, ``resolve`` with the same key.

More drift on the same app updates one incident; the app back in sync resolves it. Summary at most
1,024 characters; severity from the report (critical, error, warning, info); the changes go in
``custom_details``. HTTP 202 is success; 400 is permanent (a malformed event); 429 and 5xx retry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from driftguard.errors import ConfigError
from notifier.channels._http import status_check
from notifier.channels.base import FALLBACK, NOTICE, RESOLVE, Outbound, require_url
from notifier.config import ChannelConfig
from notifier.render import Templates, fallback_text

__all__ = ["PagerDutyChannel", "dedup_key"]

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
MAX_SUMMARY = 1024


def dedup_key(app: Mapping[str, Any]) -> str:
    """One incident per Application."""
    return f"driftguard/{app.get('namespace') or 'argocd'}/{app['name']}"


class PagerDutyChannel:
    type = "pagerduty"
    idempotent = True  # the same dedup_key: a resend updates the one incident

    def __init__(self, cfg: ChannelConfig, templates: Templates, *, locale: str) -> None:
        where = f"config.channels.{cfg.name}"
        if len(cfg.routing_key) != 32:
            raise ConfigError(
                f"{where}.routing_key",
                "is required: the 32-character integration key of an Events API v2 integration",
            )
        self.name = cfg.name
        self.routing_key = cfg.routing_key
        self.url = require_url(cfg.url or EVENTS_URL, setting=f"{where}.url")
        self.locale = cfg.locale or "en"
        self.templates = templates

    def payload(self, view: dict[str, Any], *, kind: str) -> dict[str, Any]:
        key = dedup_key(view["app"])
        if kind == RESOLVE:
            return {"event_action": "resolve", "dedup_key": key}
        details: dict[str, Any]
        if kind == NOTICE:
            title = self.templates.render("pagerduty", self.locale, "notice_title", view)
            body = self.templates.render("pagerduty", self.locale, "notice_body", view)
            summary = f"{title}: {body}".replace("\n", " ")
            details = {
                "app": view["app"],
                "event": view["event"],
                "message": view["message"],
                "lines": view["lines"][:100],
                "counts": view["counts"],
            }
        elif kind == FALLBACK:
            summary = fallback_text(view, self.locale)
            details = {"app": view["app"], "reason": view["reason"]}
        else:
            summary = self.templates.render("pagerduty", self.locale, "summary", view)
            details = {
                "app": view["app"],
                "changes": [c for res in view["resources"] for c in res["changes"]][:100],
                "suppressed": view["suppressed"],
                "fingerprint": view["fingerprint"],
                "actor": view.get("who", ""),  # the person behind the drift (issue 21)
            }
        if len(summary) > MAX_SUMMARY:
            summary = summary[: MAX_SUMMARY - 1] + "…"
        event: dict[str, Any] = {
            "event_action": "trigger",
            "dedup_key": key,
            "client": "driftguard",
            "payload": {
                "summary": summary,
                "source": f"{view['app']['cluster'] or 'cluster'}/{view['app']['name']}",
                "severity": view["severity"],
                "component": view["app"]["destination_namespace"] or view["app"]["name"],
                "group": view["app"]["project"],
                "class": "gitops-drift",
                "custom_details": details,
            },
        }
        if view.get("link"):
            event["links"] = [{"href": view["link"], "text": "Argo CD"}]
            event["client_url"] = view["link"]
        return event

    def prepare(self, payload: dict[str, Any]) -> Outbound:
        body = {"routing_key": self.routing_key, **payload}
        return Outbound(
            self.url, json.dumps(body, ensure_ascii=False).encode(), {"Content-Type": "application/json"}
        )

    def check(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        status_check(self.name, status, headers, body)

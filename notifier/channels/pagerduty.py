"""PagerDuty Events API v2: ``trigger`` with a stable ``dedup_key`` per app and kind, ``resolve`` with the same key.

Limits (Events API v2 docs): the event at most 512 KB, ``summary`` at most 1,024 characters,
``dedup_key`` at most 255 (a longer one is shortened with a hash of the whole). ``custom_details``
is kept under 64 KB: kinds with counts and the first names, changed paths with short values,
never whole objects; what is left out is counted in ``not_shown``.

Newest drift: PagerDuty keeps one alert per open ``dedup_key`` and appends a later trigger to
that alert's log (its title stays the first trigger's summary). One key per app keeps one
incident per drift episode, resolved when the app matches Git again; every trigger's summary
leads with the newest change (changes are ordered newest first) and ``custom_details.newest``
names it with its time, so the newest log entry of the open incident is always the current
drift. ``custom_details.cause`` says why a prune set is there when Argo CD knows (a refused render
and its gating key: driftguard/cause.py); ``links`` add the first resource listed in the Argo CD
UI. HTTP 202 is success; 400 is permanent (a malformed event); 429 and 5xx retry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from driftguard.errors import ConfigError
from notifier.channels._fit import items, largest, left_out
from notifier.channels._http import status_check
from notifier.channels.base import FALLBACK, INCIDENTS, NOTICE, RESOLVE, Outbound, incident_of, require_url
from notifier.config import ChannelConfig
from notifier.digest import digest, localize_notice, short
from notifier.render import Templates, fallback_text

__all__ = ["INCIDENTS", "PagerDutyChannel", "dedup_key", "incident_of"]

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
MAX_SUMMARY = 1024
MAX_DEDUP_KEY = 255
MAX_DETAILS = 64 * 1024
MAX_EVENT = 512 * 1024


def dedup_key(app: Mapping[str, Any], incident: str = "drift") -> str:
    """One incident per Application and kind; names too long for 255 characters keep a prefix and a hash of the whole."""
    key = f"driftguard/{app.get('namespace') or 'argocd'}/{app['name']}/{incident}"
    if len(key) <= MAX_DEDUP_KEY:
        return key
    digest_ = hashlib.sha256(key.encode()).hexdigest()[:32]
    return f"{key[: MAX_DEDUP_KEY - 33]}~{digest_}"


def _summary(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_SUMMARY else text[: MAX_SUMMARY - 1] + "…"


def _bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


class PagerDutyChannel:
    type = "pagerduty"
    idempotent = True  # the same dedup_key: a resend updates the one incident
    per_incident = True
    default_locale = "en"

    def __init__(
        self, cfg: ChannelConfig, templates: Templates, *, locale: str, time_zone: str = "UTC"
    ) -> None:
        self.tz = ZoneInfo(time_zone)
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

    def payload(self, view: dict[str, Any], *, kind: str, now: datetime | None = None) -> dict[str, Any]:
        key = dedup_key(view["app"], incident_of(view))
        if kind == RESOLVE:
            return {"event_action": "resolve", "dedup_key": key}
        details: dict[str, Any]
        resource_links: list[dict[str, str]] = []
        if kind == NOTICE:
            view = localize_notice(view, self.tz, self.locale)
            title = self.templates.render("pagerduty", self.locale, "notice_title", view)
            body = self.templates.render("pagerduty", self.locale, "notice_body", view)
            summary = _summary(f"{title}{'：' if self.locale == 'zh-CN' else ': '}{body}")
            details = {
                "app": view["app"],
                "event": view["event"],
                "message": short(view["message"], 4000),
                "lines": [short(line, 500) for line in view["lines"][:100]],
                "counts": view["counts"],
            }
        elif kind == FALLBACK:
            summary = _summary(fallback_text(view, self.locale))
            details = {"app": view["app"], "reason": short(view["reason"], 4000)}
        else:
            d = digest(view, tz=self.tz, now=now or datetime.now(UTC), locale=self.locale)
            summary = _summary(self.templates.render("pagerduty", self.locale, "title", d))
            details = self._details(view, d, summary)
            view = {**view, "severity": d["severity"]}
            if view.get("link") and d["resource_link"]:
                label = " ".join(
                    self.templates.render("pagerduty", self.locale, "resource_button", d).split()
                )
                resource_links = [{"href": d["resource_link"], "text": short(label, 255)}]
        event: dict[str, Any] = {
            "event_action": "trigger",
            "dedup_key": key,
            "client": "driftguard",
            "payload": {
                "summary": summary,
                "source": short(f"{view['app']['cluster'] or 'cluster'}/{view['app']['name']}", 255),
                "severity": view["severity"],
                "component": short(view["app"]["destination_namespace"] or view["app"]["name"], 255),
                "group": short(view["app"]["project"], 255),
                "class": "gitops-drift",
                "custom_details": details,
            },
        }
        if view.get("link"):
            event["links"] = [{"href": view["link"], "text": "Argo CD"}, *resource_links]
            event["client_url"] = view["link"]
        return event

    def _details(self, view: dict[str, Any], d: dict[str, Any], summary: str) -> dict[str, Any]:
        """custom_details within MAX_DETAILS: kinds and changes, cut by bytes, with what was left out."""
        rows: list[dict[str, Any]] = []
        for macro, item in items(d):
            if macro == "group":
                rows.append(
                    {
                        "class": item["cls"],
                        "kind": item["kind"],
                        "count": item["count"],
                        "protected": item["protected"],
                        "names": item["names"],
                        "more_names": item["more_names"],
                    }
                )
            else:
                rows.append(
                    {
                        "resource": {"kind": item["kind"], "name": item["name"]},
                        "class": item["cls"],
                        "readable": item["readable"],
                        "path": item["path"],
                        "old": item["old"],
                        "new": item["new"],
                        "field_manager": item["manager"],
                        "actor": {"user": item["user"], "matched": item["matched"], "source": item["source"]},
                        "at": f"{item['when']['at']} {item['when']['zone']}" if item["when"] else "",
                        "codify": item["codify"],
                    }
                )
        todo = [
            line
            for line in self.templates.render("pagerduty", self.locale, "todo", d).splitlines()
            if line.strip()
        ]
        head = d["headline"]
        cause = (
            {**d["cause"], "text": self.templates.render("pagerduty", self.locale, "cause", d)}
            if d["cause"]
            else None
        )

        def build(k: int) -> dict[str, Any]:
            shown = rows[:k]
            return {
                "app": view["app"],
                # the person behind the newest human drift (issue 21), in the channel's locale and zone
                "actor": d["who"],
                "newest": summary,
                "cause": cause,
                "newest_at": f"{head['when']['at']} {head['when']['zone']}" if head and head["when"] else "",
                "what_to_do": todo,
                "kinds": [r for r in shown if "count" in r],
                "changes": [r for r in shown if "count" not in r],
                "not_shown": left_out(d, k),
                "suppressed": view["suppressed"],
                "fingerprint": view["fingerprint"],
            }

        return build(largest(len(rows), lambda k: _bytes(build(k)) <= MAX_DETAILS))

    def prepare(self, payload: dict[str, Any]) -> Outbound:
        body = {"routing_key": self.routing_key, **payload}
        return Outbound(
            self.url, json.dumps(body, ensure_ascii=False).encode(), {"Content-Type": "application/json"}
        )

    def check(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        status_check(self.name, status, headers, body)

"""The one interface every channel implements, and what they share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlparse

from driftguard.errors import ConfigError

__all__ = [
    "ALERT",
    "FALLBACK",
    "INCIDENTS",
    "KINDS",
    "NOTICE",
    "RESOLVE",
    "Channel",
    "Outbound",
    "incident_of",
    "require_url",
]

ALERT = "alert"
RESOLVE = "resolve"
NOTICE = "notice"
"""A trigger's own message: sync failed, render refused, prunes pending."""
FALLBACK = "fallback"
"""The plain alert sent when the detailed one could not be built."""
KINDS = (ALERT, RESOLVE, NOTICE, FALLBACK)

INCIDENTS = ("drift", "sync", "render", "prune")
"""One PagerDuty incident per app and kind, each resolved on its own condition (notifier/alerts/plan.py):
an acknowledged drift incident must not swallow a later sync failure on the same app."""
_BY_EVENT = {
    "sync-failed": "sync",
    "render-refused": "render",
    "prune-pending": "prune",
    "drift-reverted": "drift",
}


def incident_of(view: Mapping[str, Any]) -> str:
    """The incident kind a view belongs to: the worker's ``incident``, else the notice's event's, else drift."""
    given = view.get("incident")
    if given in INCIDENTS:
        return str(given)
    return _BY_EVENT.get(str(view.get("event") or ""), "drift")


@dataclass(frozen=True)
class Outbound:
    """One HTTP request ready to send; ``url`` and headers may hold secrets: never log them."""

    url: str = field(repr=False)
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    method: str = "POST"


class Channel(Protocol):
    """Builds a channel's payload when a message is queued, and the request when it is sent."""

    name: str
    type: str
    locale: str
    idempotent: bool
    """A resend of a message the receiver already took is harmless (PagerDuty's dedup_key)."""
    per_incident: bool
    """One alert and one resolve per incident kind (``INCIDENTS``), each resolved on its own condition
    (PagerDuty); else one alert per drift and one resolve when the app is back in sync."""
    default_locale: str
    """The locale ``driftguard-notifier preview`` shows when none is asked for."""

    def payload(self, view: dict[str, Any], *, kind: str, now: datetime | None = None) -> dict[str, Any]:
        """The message (JSON-able), from the report view; ``now`` is when ages ("3 min ago") count from."""
        ...

    def prepare(self, payload: dict[str, Any]) -> Outbound:
        """The request to send now (signatures and timestamps are made here)."""
        ...

    def check(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        """Raise Retryable or Permanent unless the receiver accepted the message."""
        ...


def require_url(value: str, *, setting: str) -> str:
    """An http(s) URL with a host, or a ConfigError naming the setting (the URL itself is not shown)."""
    parsed = urlparse(value)
    if parsed.scheme not in ("https", "http") or not parsed.netloc:
        raise ConfigError(setting, "must be an http(s) URL with a host")
    return value

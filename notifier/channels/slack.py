"""Slack: an incoming webhook, or ``chat.postMessage`` with a bot token; Block Kit with a text fallback.

Limits kept (Block Kit reference): at most 50 blocks, section text at most 3,000 characters,
header at most 150; lines are never cut, so every code span stays balanced, and the lines that
do not fit are counted in the "more" line. Values sit in inline code, escaped by
``slack_code`` below; the ``text`` fallback (notifications, phones) is escaped plain words without
values or JSON. The
webhook answers ``ok``; ``chat.postMessage`` answers HTTP 200 with ``ok: false`` on error
(``ratelimited`` is retried). HTTP 429 carries Retry-After, which the outbox honours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from driftguard.errors import ConfigError, Permanent, Retryable
from notifier.channels._fit import MAX_ITEMS, items, largest, left_out
from notifier.channels._http import snippet, status_check
from notifier.channels.base import FALLBACK, NOTICE, RESOLVE, Outbound, require_url
from notifier.config import ChannelConfig
from notifier.digest import digest, localize_notice, trim_notice
from notifier.escape import by_line, escaped, one_line
from notifier.render import Templates, fallback_text

__all__ = ["SlackChannel", "slack_code", "slack_text"]

POST_MESSAGE = "https://slack.com/api/chat.postMessage"
MAX_BLOCKS, MAX_SECTION, MAX_HEADER = 50, 3000, 150
RETRYABLE_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "service_unavailable", "internal_error", "fatal_error", "request_timeout"}
)


MAX_TEXT = 3000


# --- escaping (Slack's "Formatting text" guide): ``&``, ``<``, ``>`` are the only characters Slack
# lets one escape, so values go inside inline code, where ``*_~`` are literal, and a backtick in a
# value becomes U+02CB (a lookalike) so the span cannot be closed from inside.


def slack_text(text: str) -> str:
    """Slack's three control characters escaped (for ``text`` fallbacks and outside code)."""
    return one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_code(text: str) -> str:
    """A value to put between backticks: nothing in it can close the span or format."""
    text = slack_text(text).replace("`", "\u02cb").replace("://", ":\u200b//")
    return text if text.strip() else "-"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _header(text: str) -> dict[str, Any]:
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": _cut(" ".join(text.split()), MAX_HEADER)},
    }


def _button(label: str, url: str) -> dict[str, Any]:
    """Block Kit button: text at most 75 characters, url at most 3,000."""
    return {"type": "button", "text": {"type": "plain_text", "text": _cut(label, 75)}, "url": url[:3000]}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _cut_lines(text: str, limit: int = MAX_SECTION) -> str:
    """At most ``limit`` characters, cut at a line end (lines keep their code spans whole)."""
    if len(text) <= limit:
        return text
    kept = text[: limit - 2].rsplit("\n", 1)[0]
    return kept + "\n…" if "\n" in text[: limit - 2] else "…"


def pack(lines: list[str], limit: int = MAX_SECTION) -> list[str]:
    """Lines joined into as few section texts of at most ``limit`` characters as they fit."""
    out: list[str] = []
    for line in lines:
        line = _cut_lines(line, limit)
        if out and len(out[-1]) + 1 + len(line) <= limit:
            out[-1] += "\n" + line
        else:
            out.append(line)
    return out


class SlackChannel:
    type = "slack"
    idempotent = False  # a resent message is a second message
    per_incident = False
    default_locale = "en"

    def __init__(
        self, cfg: ChannelConfig, templates: Templates, *, locale: str, time_zone: str = "UTC"
    ) -> None:
        self.tz = ZoneInfo(time_zone)
        where = f"config.channels.{cfg.name}"
        self.name = cfg.name
        self.token = cfg.token
        self.channel = cfg.channel
        if cfg.token:
            if not cfg.channel:
                raise ConfigError(
                    f"{where}.channel", "is required with a token (chat.postMessage needs a channel)"
                )
            self.url = require_url(cfg.url or POST_MESSAGE, setting=f"{where}.url")
        else:
            if not cfg.url:
                raise ConfigError(
                    f"{where}.url", "is required: an incoming webhook URL (or set token and channel)"
                )
            self.url = require_url(cfg.url, setting=f"{where}.url")
        self.locale = cfg.locale or "en"
        self.templates = templates

    def _t(self, macro: str, arg: Any) -> str:
        return self.templates.render("slack", self.locale, macro, arg)

    def payload(self, view: dict[str, Any], *, kind: str, now: datetime | None = None) -> dict[str, Any]:
        if kind in (NOTICE, FALLBACK):
            if kind == NOTICE:
                view = localize_notice(trim_notice(view), self.tz, self.locale)
                title = self._t("notice_title", view)
                e = escaped(view, slack_code)
                if view.get("message"):  # its lines kept, each escaped (a ``` block in the template)
                    e["message"] = by_line(view["message"], slack_code)
                text = self._t("notice_body", e)
            else:
                title = f"driftguard: {view['app']['name']}"
                text = slack_text(fallback_text(view, self.locale))
            blocks = [_header(title), _section(_cut_lines(text))]
            if view.get("link"):  # every message links to Argo CD (issue 30)
                blocks.append(
                    {"type": "actions", "elements": [_button(self._t("button", view), view["link"])]}
                )
            return {"text": _cut(slack_text(title), MAX_TEXT), "blocks": blocks}
        d = digest(view, tz=self.tz, now=now or datetime.now(UTC), locale=self.locale)
        e = escaped(d, slack_code)
        if kind == RESOLVE:
            text = _cut_lines(self._t("resolved", e))
            blocks = [_section(text)]
            if d["link"]:
                blocks.append({"type": "actions", "elements": [_button(self._t("button", e), d["link"])]})
            return {"text": _cut(slack_text(self._t("resolved_title", d)), MAX_TEXT), "blocks": blocks}
        title = self._t("title", d)
        lines = [self._t(macro, item) for macro, item in items(e)]
        facts, todo = _cut_lines(self._t("facts", e)), _cut_lines(self._t("todo", e))
        cause = _cut_lines(self._t("cause", e))  # below the list, never cut away: it says why
        tail: list[dict[str, Any]] = [_section(cause)] if cause else []
        if todo:
            tail.append(_section(todo))
        if d["link"]:
            buttons = [_button(self._t("button", e), d["link"])]
            if d["resource_link"]:  # plain text: the raw digest's words, one line
                buttons.append(_button(" ".join(self._t("resource_button", d).split()), d["resource_link"]))
            tail.append({"type": "actions", "elements": buttons})

        def build(k: int) -> list[dict[str, Any]]:
            more = _section(_cut_lines(self._t("more", left_out(d, k))))
            return [_header(title), _section(facts), *map(_section, pack(lines[:k])), more, *tail]

        blocks = build(largest(min(len(lines), MAX_ITEMS), lambda k: len(build(k)) <= MAX_BLOCKS))
        return {"text": _cut(slack_text(self._t("fallback", d)), MAX_TEXT), "blocks": blocks}

    def prepare(self, payload: dict[str, Any]) -> Outbound:
        headers = {"Content-Type": "application/json; charset=utf-8"}
        body = dict(payload)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
            body["channel"] = self.channel
        return Outbound(self.url, json.dumps(body, ensure_ascii=False).encode(), headers)

    def check(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        status_check(self.name, status, headers, body)
        if not self.token:
            return  # incoming webhooks answer 200 "ok"; errors come as 4xx with a word
        try:
            answer = json.loads(body or b"{}")
        except ValueError as exc:
            raise Retryable(f"{self.name}: answered something that is not JSON: {snippet(body)}") from exc
        if isinstance(answer, dict) and answer.get("ok") is True:
            return
        error = str(answer.get("error", "unknown")) if isinstance(answer, dict) else "unknown"
        if error in RETRYABLE_ERRORS:
            raise Retryable(
                f"{self.name}: {error}", retry_after=float(headers.get("Retry-After", 0) or 0) or None
            )
        raise Permanent(f"{self.name}: chat.postMessage refused: {error}")

"""Slack: an incoming webhook, or ``chat.postMessage`` with a bot token; Block Kit with a text fallback.

Limits kept: at most 50 blocks, section text at most 3,000 characters, header at most 150. The
webhook answers ``ok``; ``chat.postMessage`` answers HTTP 200 with ``ok: false`` on error
(``ratelimited`` is retried). HTTP 429 carries Retry-After, which the outbox honours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from driftguard.errors import ConfigError, Permanent, Retryable
from notifier.channels._http import snippet, status_check
from notifier.channels.base import FALLBACK, NOTICE, RESOLVE, Outbound, require_url
from notifier.config import ChannelConfig
from notifier.render import Templates, fallback_text

__all__ = ["SlackChannel"]

POST_MESSAGE = "https://slack.com/api/chat.postMessage"
MAX_BLOCKS, MAX_SECTION, MAX_HEADER = 50, 3000, 150
RETRYABLE_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "service_unavailable", "internal_error", "fatal_error", "request_timeout"}
)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class SlackChannel:
    type = "slack"
    idempotent = False  # a resent message is a second message

    def __init__(self, cfg: ChannelConfig, templates: Templates, *, locale: str) -> None:
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

    def payload(self, view: dict[str, Any], *, kind: str) -> dict[str, Any]:
        if kind in (NOTICE, FALLBACK):
            if kind == NOTICE:
                title, text = self._t("notice_title", view), self._t("notice_body", view)
            else:
                title, text = f"driftguard: {view['app']['name']}", fallback_text(view, self.locale)
            return {
                "text": _cut(f"{title}: {text}", 3000),
                "blocks": [
                    {
                        "type": "header",
                        "text": {"type": "plain_text", "text": _cut(title, MAX_HEADER), "emoji": True},
                    },
                    {"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, MAX_SECTION)}},
                ],
            }
        if kind == RESOLVE:
            text = self._t("resolved", view)
            return {
                "text": text,
                "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, MAX_SECTION)}}],
            }
        blocks: list[dict[str, Any]] = [
            {
                "type": "header",
                "text": {
                    "type": "plain_text",
                    "text": _cut(self._t("header", view), MAX_HEADER),
                    "emoji": True,
                },
            },
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": _cut(self._t("summary", view), MAX_SECTION)},
            },
        ]
        shown = 0
        resources = view["resources"]
        for res in resources:
            if len(blocks) >= MAX_BLOCKS - 3:  # keep room for "more", divider and context
                break
            blocks.append(
                {
                    "type": "section",
                    "text": {"type": "mrkdwn", "text": _cut(self._t("resource", res), MAX_SECTION)},
                }
            )
            shown += len(res["changes"])
        if shown < view["total"]:
            blocks.append(
                {
                    "type": "section",
                    "text": {"type": "mrkdwn", "text": self._t("more", view["total"] - shown)},
                }
            )
        blocks.append({"type": "divider"})
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": _cut(self._t("context", view), MAX_SECTION)}],
            }
        )
        return {"text": _cut(self._t("fallback", view), 3000), "blocks": blocks}

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

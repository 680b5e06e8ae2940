"""Feishu / Lark custom bot: a signed interactive card, Chinese by default.

Signing (when a secret is set): key = ``timestamp + "\\n" + secret``, HMAC-SHA256 over an empty
message, base64; sent as ``sign`` with ``timestamp`` (seconds). The bot answers HTTP 200 with
``{"code": 0}`` on success; any other code is a failure, rate limits (9499, 11232, 11233) retried.
Cards are kept under 20 KB: changes past that are replaced by "N more changes".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from driftguard.errors import ConfigError, Permanent, Retryable
from notifier.channels._http import snippet, status_check
from notifier.channels.base import FALLBACK, NOTICE, RESOLVE, Outbound, require_url
from notifier.config import ChannelConfig
from notifier.render import Templates, fallback_text

__all__ = ["FeishuChannel", "sign"]

MAX_BYTES = 20 * 1024
RATE_LIMIT_CODES = frozenset({9499, 11232, 11233})
COLOURS = {"critical": "red", "error": "orange", "warning": "yellow", "info": "blue", "resolved": "green"}


def sign(timestamp: int, secret: str) -> str:
    """Feishu's signature for a custom bot."""
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


class FeishuChannel:
    type = "feishu"
    idempotent = False  # a resent card is a second card

    def __init__(self, cfg: ChannelConfig, templates: Templates, *, locale: str) -> None:
        if not cfg.url:
            raise ConfigError(
                f"config.channels.{cfg.name}.url", "is required: the Feishu/Lark custom bot webhook URL"
            )
        self.name = cfg.name
        self.url = require_url(cfg.url, setting=f"config.channels.{cfg.name}.url")
        self.secret = cfg.secret
        self.locale = cfg.locale or locale
        self.templates = templates

    def _t(self, macro: str, arg: Any) -> str:
        return self.templates.render("feishu", self.locale, macro, arg)

    def payload(self, view: dict[str, Any], *, kind: str) -> dict[str, Any]:
        if kind == RESOLVE:
            elements: list[dict[str, Any]] = [_md(self._t("resolved_body", view))]
            return _card(self._t("resolved_title", view), "resolved", elements, self._button(view))
        if kind == NOTICE:
            body = self._t("notice_body", view)
            return _card(
                self._t("notice_title", view),
                view["severity"],
                [_md(body[: MAX_BYTES // 2])],
                self._button(view),
            )
        if kind == FALLBACK:
            title = f"driftguard: {view['app']['name']}"
            return _card(title, "error", [_md(fallback_text(view, self.locale))], None)
        elements = [_md(self._t("summary", view)), {"tag": "hr"}]
        shown = 0
        for res in view["resources"]:
            candidate = [*elements, _md(self._t("resource", res))]
            if (
                len(
                    json.dumps(
                        _card(self._t("title", view), view["severity"], candidate, self._button(view)),
                        ensure_ascii=False,
                    ).encode()
                )
                > MAX_BYTES - 512
            ):
                break
            elements = candidate
            shown += len(res["changes"])
        if shown < view["total"]:
            elements.append(_md(self._t("more", view["total"] - shown)))
        return _card(self._t("title", view), view["severity"], elements, self._button(view))

    def _button(self, view: dict[str, Any]) -> dict[str, Any] | None:
        if not view.get("link"):
            return None
        return {
            "tag": "action",
            "actions": [
                {
                    "tag": "button",
                    "type": "primary",
                    "text": {"tag": "plain_text", "content": self._t("button", view)},
                    "url": view["link"],
                }
            ],
        }

    def prepare(self, payload: dict[str, Any]) -> Outbound:
        body = dict(payload)
        if self.secret:
            ts = int(time.time())
            body["timestamp"] = str(ts)
            body["sign"] = sign(ts, self.secret)
        return Outbound(
            self.url,
            json.dumps(body, ensure_ascii=False).encode(),
            {"Content-Type": "application/json; charset=utf-8"},
        )

    def check(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        status_check(self.name, status, headers, body)
        try:
            answer = json.loads(body or b"{}")
        except ValueError as exc:
            raise Retryable(f"{self.name}: answered something that is not JSON: {snippet(body)}") from exc
        code = answer.get("code", answer.get("StatusCode", 0)) if isinstance(answer, dict) else 0
        if code in (0, None):
            return
        msg = answer.get("msg") or answer.get("StatusMessage") or ""
        if code in RATE_LIMIT_CODES:
            raise Retryable(f"{self.name}: rate limited (code {code}: {msg})", retry_after=5.0)
        raise Permanent(f"{self.name}: refused (code {code}: {msg})")


def _md(text: str) -> dict[str, Any]:
    return {"tag": "div", "text": {"tag": "lark_md", "content": text}}


def _card(
    title: str, severity: str, elements: list[dict[str, Any]], button: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "msg_type": "interactive",
        "card": {
            "config": {"wide_screen_mode": True},
            "header": {
                "template": COLOURS.get(severity, "blue"),
                "title": {"tag": "plain_text", "content": title},
            },
            "elements": elements + ([button] if button else []),
        },
    }

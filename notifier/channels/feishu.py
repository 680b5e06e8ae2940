"""Feishu / Lark custom bot: a signed interactive card (card JSON 2.0), Chinese by default.

Signing (when a secret is set): key = ``timestamp + "\\n" + secret``, HMAC-SHA256 over an empty
message, base64; sent as ``sign`` with ``timestamp`` (seconds). The bot answers HTTP 200 with
``{"code": 0}`` on success. Documented codes (open.feishu.cn, custom bot guide and "frequency
control"): 11232 is the rate limit (a custom bot may send 100 messages a minute, 5 a second), so
it is retried after that one-minute window; every other non-zero code (19021 bad signature, 9499
bad request, 19024 keyword check ...) is permanent, dead-lettered with its code and message.

Cards use JSON 2.0 (``schema: "2.0"``, ``body.elements``, the ``markdown`` component, which
renders inline code and lists); the header colour follows severity; a button opens the
Application in Argo CD and a second one the first resource listed (the Argo CD UI's ``?node=``
selection, notifier/digest.py ``resource_link``). The cause of a prune set (a refused render and
its gating key, driftguard/cause.py) sits below the list and is never cut. The request body, signing fields included, stays under 20 KB: the card
is measured after rendering and items past that are counted in the "more" line.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
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

__all__ = ["FeishuChannel", "feishu_md", "sign"]

MAX_BYTES = 20 * 1024
SIGN_MARGIN = 512
"""Room for ``timestamp`` and ``sign`` (about 70 bytes) added when the request is made."""
MAX_TITLE = 200
RATE_LIMIT_CODES = frozenset({11232})
RATE_LIMIT_WINDOW = 60.0
COLOURS = {"critical": "red", "error": "orange", "warning": "yellow", "info": "blue", "resolved": "green"}


# --- escaping: every cluster- or Git-sourced value in a ``markdown`` component ---------------------
# markdown specials and ``<``/``>``/``&`` become HTML entities, so ``<at id=all></at>`` and
# ``[x](https://...)`` show as text; a URL's ``://`` gets a zero-width space so it is not auto-linked.

_FEISHU = {c: f"&#{ord(c)};" for c in "*_~`[]()#|\\{}"}
_FEISHU.update({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def feishu_md(text: str) -> str:
    """Literal text inside a Feishu markdown component."""
    text = one_line(text).replace("://", ":\u200b//")
    return "".join(_FEISHU.get(c, c) for c in text)


def sign(timestamp: int, secret: str) -> str:
    """Feishu's signature for a custom bot."""
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def size(payload: dict[str, Any]) -> int:
    """Bytes of the body as sent (before the signing fields)."""
    return len(json.dumps(payload, ensure_ascii=False).encode())


class FeishuChannel:
    type = "feishu"
    idempotent = False  # a resent card is a second card
    per_incident = False
    default_locale = "zh-CN"

    def __init__(
        self, cfg: ChannelConfig, templates: Templates, *, locale: str, time_zone: str = "UTC"
    ) -> None:
        if not cfg.url:
            raise ConfigError(
                f"config.channels.{cfg.name}.url", "is required: the Feishu/Lark custom bot webhook URL"
            )
        self.name = cfg.name
        self.url = require_url(cfg.url, setting=f"config.channels.{cfg.name}.url")
        self.secret = cfg.secret
        self.locale = cfg.locale or locale
        self.templates = templates
        self.tz = ZoneInfo(time_zone)

    def _t(self, macro: str, arg: Any) -> str:
        return self.templates.render("feishu", self.locale, macro, arg)

    def payload(self, view: dict[str, Any], *, kind: str, now: datetime | None = None) -> dict[str, Any]:
        if kind == FALLBACK:
            title = _line(f"driftguard: {view['app']['name']}")
            text = feishu_md(fallback_text(view, self.locale))
            return _card(title, "error", [_md(text)], view.get("link") or "", "")
        if kind == NOTICE:
            view = localize_notice(trim_notice(view), self.tz, self.locale)
            e = escaped(view, feishu_md)
            if view.get("message"):  # its lines kept, each escaped
                e["message"] = by_line(view["message"], feishu_md)
            body = self._t("notice_body", e)
            title = _line(self._t("notice_title", view))
            card = _card(title, view["severity"], [_md(body)], view.get("link") or "", self._t("button", e))
            while size(card) > MAX_BYTES - SIGN_MARGIN:  # an enormous Argo CD message: cut by lines
                body = body[: int(len(body) * 0.8)].rsplit("\n", 1)[0] + "\n…"
                card = _card(
                    title, view["severity"], [_md(body)], view.get("link") or "", self._t("button", e)
                )
            return card
        d = digest(view, tz=self.tz, now=now or datetime.now(UTC), locale=self.locale)
        e = escaped(d, feishu_md)
        if kind == RESOLVE:
            return _card(
                _line(self._t("resolved_title", d)),
                "resolved",
                [_md(self._t("resolved_body", e))],
                d["link"],
                self._t("button", e),
            )
        title = _line(self._t("title", d))
        lines = [self._t(macro, item) for macro, item in items(e)]
        head, todo, button = self._t("facts", e), self._t("todo", e), self._t("button", e)
        cause = self._t("cause", e)  # right below the prune summary, never cut: it says why
        # the button is plain text: the raw digest, one line (no markdown to escape)
        extra = (_line(self._t("resource_button", d)), d["resource_link"]) if d["resource_link"] else None

        def build(k: int) -> dict[str, Any]:
            elements = [_md(head), {"tag": "hr"}]
            if k:
                elements.append(_md("\n".join(lines[:k])))
            elements.append(_md(self._t("more", left_out(d, k))))
            if cause:
                elements.append(_md(cause))
            if todo:
                elements.append(_md(todo))
            return _card(title, d["severity"], elements, d["link"], button, extra)

        return build(largest(min(len(lines), MAX_ITEMS), lambda k: size(build(k)) <= MAX_BYTES - SIGN_MARGIN))

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
            raise Retryable(
                f"{self.name}: rate limited (code {code}: {snippet(str(msg).encode())})",
                retry_after=RATE_LIMIT_WINDOW,
            )
        raise Permanent(f"{self.name}: refused (code {code}: {snippet(str(msg).encode())})")


def _line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TITLE else text[: MAX_TITLE - 1] + "…"


def _md(text: str) -> dict[str, Any]:
    return {"tag": "markdown", "content": text}


def _button(label: str, link: str, kind: str) -> dict[str, Any]:
    return {
        "tag": "button",
        "text": {"tag": "plain_text", "content": label or "Argo CD"},
        "type": kind,
        "behaviors": [{"type": "open_url", "default_url": link}],
    }


def _card(
    title: str,
    severity: str,
    elements: list[dict[str, Any]],
    link: str,
    label: str,
    resource: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """``resource``: (label, link) of a second button, to the first resource listed."""
    body = list(elements)
    if link:
        body.append(_button(label, link, "primary"))
    if link and resource:
        body.append(_button(resource[0], resource[1], "default"))
    return {
        "msg_type": "interactive",
        "card": {
            "schema": "2.0",
            "config": {"update_multi": True},
            "header": {
                "template": COLOURS.get(severity, "blue"),
                "title": {"tag": "plain_text", "content": title},
            },
            "body": {"elements": body},
        },
    }

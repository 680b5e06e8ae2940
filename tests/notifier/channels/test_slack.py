"""SlackChannel: Block Kit limits, the text fallback, Retry-After, chat.postMessage's ok:false."""

from __future__ import annotations

import pytest

from driftguard.errors import ConfigError, Permanent, Retryable
from notifier.channels._http import HttpSender
from notifier.channels.slack import SlackChannel
from notifier.config import ChannelConfig
from notifier.render import Templates
from standins.receivers import Receivers

from .views import big_view, small_view


def webhook(rx: Receivers) -> SlackChannel:
    return SlackChannel(
        ChannelConfig("slack", "slack", url=rx.url + "/slack", locale="zh-CN"), Templates(), locale="zh-CN"
    )


def test_blocks_and_fallback(rx: Receivers) -> None:
    ch = webhook(rx)
    HttpSender().send(ch, ch.payload(small_view(), kind="alert"))
    body = rx.on("/slack")[0].json()
    # the zh-CN fallback is Chinese, plain words, no values or JSON
    assert body["text"] == "[重要] shop-api：需关注 1 项，最新改动：镜像（通过 kubectl-set）"
    assert [b["type"] for b in body["blocks"]] == [
        "header",
        "section",
        "section",
        "section",
        "section",
        "actions",
    ]
    assert "通过 `kubectl-set` 修改" in body["blocks"][2]["text"]["text"]
    assert body["blocks"][3]["text"]["text"] == "_全部 1 项均已列出。_"
    assert (
        body["blocks"][-1]["elements"][0]["url"] == "https://argocd.example.com/applications/argocd/shop-api"
    )


def test_limits_hold_for_a_huge_report(rx: Receivers) -> None:
    payload = webhook(rx).payload(big_view(300), kind="alert")
    blocks = payload["blocks"]
    assert len(blocks) <= 50
    assert len(blocks[0]["text"]["text"]) <= 150
    assert all(len(b["text"]["text"]) <= 3000 for b in blocks if b["type"] == "section")
    listed = sum(b["text"]["text"].count("• ") for b in blocks[2:-3] if b["type"] == "section")
    assert f"另外 {300 - listed} 处字段改动" in blocks[-3]["text"]["text"]


def test_429_carries_retry_after(rx: Receivers) -> None:
    rx.script("/slack", (429, "rate_limited", {"Retry-After": "7"}))
    ch = webhook(rx)
    with pytest.raises(Retryable) as exc:
        HttpSender().send(ch, ch.payload(small_view(), kind="alert"))
    assert exc.value.retry_after == 7.0


def test_webhook_errors_are_permanent(rx: Receivers) -> None:
    rx.script("/slack", (400, "invalid_blocks"))
    ch = webhook(rx)
    with pytest.raises(Permanent, match="invalid_blocks"):
        HttpSender().send(ch, ch.payload(small_view(), kind="alert"))


def test_post_message_with_token(rx: Receivers) -> None:
    ch = SlackChannel(
        ChannelConfig("s", "slack", url=rx.url + "/slack-api", token="xoxb-test-token", channel="#sre"),
        Templates(),
        locale="en",
    )
    HttpSender().send(ch, ch.payload(small_view(), kind="alert"))
    [req] = rx.on("/slack-api")
    assert req.headers["Authorization"] == "Bearer xoxb-test-token" and req.json()["channel"] == "#sre"
    rx.script("/slack-api", (200, {"ok": False, "error": "channel_not_found"}))
    with pytest.raises(Permanent, match="channel_not_found"):
        HttpSender().send(ch, ch.payload(small_view(), kind="alert"))
    rx.script("/slack-api", (200, {"ok": False, "error": "ratelimited"}, {"Retry-After": "3"}))
    with pytest.raises(Retryable) as exc:
        HttpSender().send(ch, ch.payload(small_view(), kind="alert"))
    assert exc.value.retry_after == 3.0


def test_token_needs_a_channel() -> None:
    with pytest.raises(ConfigError, match="channel"):
        SlackChannel(ChannelConfig("s", "slack", token="xoxb-1"), Templates(), locale="en")

"""FeishuChannel: the real request captured on a local server, signature verified, answers classified."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from driftguard.errors import ConfigError, Permanent, Retryable
from notifier.channels._http import HttpSender
from notifier.channels.feishu import FeishuChannel
from notifier.config import ChannelConfig
from notifier.render import Templates
from standins.receivers import Receivers

from .views import big_view, small_view


def channel(rx: Receivers, *, secret: str = "s3cret", locale: str = "zh-CN") -> FeishuChannel:
    return FeishuChannel(
        ChannelConfig("feishu", "feishu", url=rx.url + "/feishu", secret=secret), Templates(), locale=locale
    )


def test_signed_interactive_card(rx: Receivers) -> None:
    ch = channel(rx)
    HttpSender().send(ch, ch.payload(small_view(), kind="alert"))
    [req] = rx.on("/feishu")
    body = req.json()
    assert req.headers["Content-Type"].startswith("application/json")
    expected = base64.b64encode(
        hmac.new(f"{body['timestamp']}\ns3cret".encode(), b"", hashlib.sha256).digest()
    ).decode()
    assert body["sign"] == expected
    assert body["msg_type"] == "interactive" and body["card"]["header"]["template"] == "orange"
    assert "配置漂移" in body["card"]["header"]["title"]["content"]


def test_english_and_unsigned(rx: Receivers) -> None:
    ch = channel(rx, secret="", locale="en")
    HttpSender().send(ch, ch.payload(small_view(), kind="alert"))
    body = rx.on("/feishu")[0].json()
    assert "sign" not in body and body["card"]["header"]["title"]["content"] == "[ERROR] Drift in shop-api"


def test_card_stays_under_20_kb_with_a_count_of_the_rest(rx: Receivers) -> None:
    ch = channel(rx)
    payload = ch.payload(big_view(400), kind="alert")
    size = len(json.dumps(payload, ensure_ascii=False).encode())
    assert size <= 20 * 1024
    last = payload["card"]["elements"][-2]["text"]["content"]
    assert last.startswith("…… 另有 ") and "项变更未显示" in last


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (
            (
                200,
                {
                    "code": 19021,
                    "msg": "sign match fail or timestamp is not within one hour from current time",
                },
            ),
            Permanent,
        ),
        ((200, {"code": 9499, "msg": "too many request"}), Retryable),
        ((500, {"code": 1}), Retryable),
        ((400, {"code": 9499}), Permanent),
    ],
)
def test_answers_are_classified(rx: Receivers, answer: tuple[int, object], error: type[Exception]) -> None:
    rx.script("/feishu", answer)
    ch = channel(rx)
    with pytest.raises(error) as exc:
        HttpSender().send(ch, ch.payload(small_view(), kind="alert"))
    assert rx.url not in str(exc.value)  # the webhook URL is a secret


def test_bad_url_stops_start_up() -> None:
    with pytest.raises(ConfigError, match=r"config\.channels\.f\.url"):
        FeishuChannel(ChannelConfig("f", "feishu", url="ftp://x"), Templates(), locale="zh-CN")
    with pytest.raises(ConfigError, match="is required"):
        FeishuChannel(ChannelConfig("f", "feishu"), Templates(), locale="zh-CN")

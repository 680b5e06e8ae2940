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
    card = body["card"]
    assert card["schema"] == "2.0" and all(
        e["tag"] in ("markdown", "hr", "button") for e in card["body"]["elements"]
    )
    # the title carries the change and the field manager, not only "drift in <app>"
    assert card["header"]["title"]["content"] == (
        "重要｜shop-api：镜像 registry.example.com/api:0 → registry.example.com/api:0-hotfix（通过 kubectl-set）"
    )
    button, resource = card["body"]["elements"][-2:]
    assert button["tag"] == "button" and button["type"] == "primary"
    assert button["behaviors"] == [
        {"type": "open_url", "default_url": "https://argocd.example.com/applications/argocd/shop-api"}
    ]
    # and the first resource listed, selected in the Argo CD UI (?node=group/kind/namespace/name/container)
    assert resource["tag"] == "button" and resource["text"]["content"] == "查看 Deployment shop/api-0"
    assert resource["behaviors"] == [
        {
            "type": "open_url",
            "default_url": "https://argocd.example.com/applications/argocd/shop-api?node=apps/Deployment/shop/api-0/0",
        }
    ]


def test_english_and_unsigned(rx: Receivers) -> None:
    ch = channel(rx, secret="", locale="en")
    HttpSender().send(ch, ch.payload(small_view(), kind="alert"))
    body = rx.on("/feishu")[0].json()
    assert "sign" not in body
    assert body["card"]["header"]["title"]["content"] == (
        "[ERROR] shop-api: image registry.example.com/api:0 -> registry.example.com/api:0-hotfix (kubectl-set)"
    )


def test_card_stays_under_20_kb_with_a_count_of_the_rest(rx: Receivers) -> None:
    ch = channel(rx)
    payload = ch.payload(big_view(400), kind="alert")
    size = len(json.dumps(payload, ensure_ascii=False).encode())
    assert size <= 20 * 1024
    texts = [e["content"] for e in payload["card"]["body"]["elements"] if e["tag"] == "markdown"]
    shown = texts[1].count("\n- ") + 1
    assert f"此处未列出：另外 {400 - shown} 处字段改动" in texts[2]


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
        ((200, {"code": 11232, "msg": "frequency limited psm[lark.oapi.app_platform_runtime]"}), Retryable),
        ((200, {"code": 9499, "msg": "Bad Request"}), Permanent),
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
    body = answer[1]
    if isinstance(body, dict) and "msg" in body:  # the code and message reach the dead-letter log
        assert f"code {body['code']}: {body['msg']}" in str(exc.value)
    if isinstance(exc.value, Retryable) and answer[0] == 200:
        assert exc.value.retry_after == 60.0  # a custom bot's documented window: 100 a minute


def test_bad_url_stops_start_up() -> None:
    with pytest.raises(ConfigError, match=r"config\.channels\.f\.url"):
        FeishuChannel(ChannelConfig("f", "feishu", url="ftp://x"), Templates(), locale="zh-CN")
    with pytest.raises(ConfigError, match="is required"):
        FeishuChannel(ChannelConfig("f", "feishu"), Templates(), locale="zh-CN")

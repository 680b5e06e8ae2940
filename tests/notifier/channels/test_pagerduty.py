"""PagerDutyChannel: trigger and resolve with one dedup key per app, summary limit, answers classified."""

from __future__ import annotations

import pytest

from driftguard.errors import ConfigError, Permanent, Retryable
from notifier.channels._http import HttpSender
from notifier.channels.pagerduty import PagerDutyChannel
from notifier.config import ChannelConfig
from notifier.render import Templates
from standins.receivers import Receivers

from .views import big_view, small_view

KEY = "0123456789abcdef0123456789abcdef"


def channel(rx: Receivers) -> PagerDutyChannel:
    return PagerDutyChannel(
        ChannelConfig("pd", "pagerduty", url=rx.url + "/pagerduty", routing_key=KEY),
        Templates(),
        locale="zh-CN",
    )


def test_trigger_then_resolve_share_the_dedup_key(rx: Receivers) -> None:
    ch = channel(rx)
    sender = HttpSender()
    sender.send(ch, ch.payload(small_view(), kind="alert"))
    sender.send(ch, ch.payload(small_view(), kind="resolve"))
    trigger, resolve = (c.json() for c in rx.on("/pagerduty"))
    assert trigger["routing_key"] == KEY and trigger["event_action"] == "trigger"
    assert trigger["dedup_key"] == resolve["dedup_key"] == "driftguard/argocd/shop-api/drift"
    assert resolve == {
        "routing_key": KEY,
        "event_action": "resolve",
        "dedup_key": "driftguard/argocd/shop-api/drift",
    }
    p = trigger["payload"]
    assert (p["severity"], p["source"], p["component"], p["group"]) == (
        "error",
        "prod-1/shop-api",
        "shop",
        "shop",
    )
    assert p["custom_details"]["changes"][0]["field_manager"] == "kubectl-set"
    assert p["custom_details"]["changes"][0]["readable"] == "containers[0].image"
    assert trigger["links"] == [
        {"href": "https://argocd.example.com/applications/argocd/shop-api", "text": "Argo CD"},
        {
            "href": "https://argocd.example.com/applications/argocd/shop-api?node=apps/Deployment/shop/api-0/0",
            "text": "Argo CD: Deployment shop/api-0",
        },
    ]


def test_summary_is_at_most_1024(rx: Receivers) -> None:
    assert len(channel(rx).payload(big_view(500), kind="alert")["payload"]["summary"]) <= 1024


@pytest.mark.parametrize(
    ("status", "error"), [(400, Permanent), (429, Retryable), (500, Retryable), (503, Retryable)]
)
def test_answers(rx: Receivers, status: int, error: type[Exception]) -> None:
    rx.script("/pagerduty", (status, {"status": "invalid event", "message": "Event object is invalid"}))
    ch = channel(rx)
    with pytest.raises(error):
        HttpSender().send(ch, ch.payload(small_view(), kind="alert"))


def test_routing_key_is_validated() -> None:
    with pytest.raises(ConfigError, match="routing_key"):
        PagerDutyChannel(ChannelConfig("pd", "pagerduty", routing_key="short"), Templates(), locale="en")


def test_each_incident_kind_has_its_own_dedup_key(rx: Receivers) -> None:
    """Issue 30: one key per app silenced a sync failure behind an acknowledged drift incident."""
    from driftguard.report import AppInfo
    from notifier.render import notice_view

    ch = channel(rx)
    app = AppInfo("shop-api", destination_namespace="shop")
    keys = {
        "drift": ch.payload(small_view(), kind="alert")["dedup_key"],
        "prune": ch.payload({**small_view(), "incident": "prune"}, kind="alert")["dedup_key"],
        "sync": ch.payload(notice_view(app, event="sync-failed"), kind="notice")["dedup_key"],
        "render": ch.payload(notice_view(app, event="render-refused"), kind="notice")["dedup_key"],
    }
    assert keys == {k: f"driftguard/argocd/shop-api/{k}" for k in keys}
    resolve = ch.payload({**small_view(), "incident": "sync"}, kind="resolve")
    assert resolve["dedup_key"] == keys["sync"]

"""Channels, one module each, registered here by type; every one sends through channels/_http.py."""

from __future__ import annotations

from collections.abc import Callable

from driftguard.errors import ConfigError
from notifier.channels.base import ALERT, FALLBACK, INCIDENTS, NOTICE, RESOLVE, Channel, Outbound, incident_of
from notifier.channels.feishu import FeishuChannel
from notifier.channels.pagerduty import PagerDutyChannel
from notifier.channels.slack import SlackChannel
from notifier.config import NotifierConfig
from notifier.render import Templates

__all__ = [
    "ALERT",
    "FACTORIES",
    "FALLBACK",
    "INCIDENTS",
    "NOTICE",
    "RESOLVE",
    "Channel",
    "Outbound",
    "build_channels",
    "incident_of",
]

FACTORIES: dict[str, Callable[..., Channel]] = {
    "feishu": FeishuChannel,
    "slack": SlackChannel,
    "pagerduty": PagerDutyChannel,
}


def build_channels(config: NotifierConfig, templates: Templates) -> dict[str, Channel]:
    """Every configured channel, constructed (and so validated) now."""
    out: dict[str, Channel] = {}
    for name, cfg in config.channels.items():
        factory = FACTORIES.get(cfg.type)
        if factory is None:
            raise ConfigError(
                f"config.channels.{name}.type", f"unknown type {cfg.type!r}; known: {', '.join(FACTORIES)}"
            )
        out[name] = factory(cfg, templates, locale=config.locale, time_zone=config.time_zone)
    return out

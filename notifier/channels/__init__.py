"""Channels, one module each, registered here by type; every one sends through channels/_http.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping

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


def build_channels(
    config: NotifierConfig, templates: Templates, factories: Mapping[str, Callable[..., Channel]] = FACTORIES
) -> dict[str, Channel]:
    """Every configured channel, constructed (and so validated) now; ``factories`` is the registry
    (tests pass others)."""
    out: dict[str, Channel] = {}
    checked = templates.channels()
    for name, cfg in config.channels.items():
        factory = factories.get(cfg.type)
        if factory is None:
            raise ConfigError(
                f"config.channels.{name}.type", f"unknown type {cfg.type!r}; known: {', '.join(factories)}"
            )
        if cfg.type not in checked:  # registered without its templates: fail here, not at the first alert
            raise ConfigError(
                f"config.channels.{name}.type",
                f"type {cfg.type!r} is registered but has no templates: add notifier/templates/"
                f"{cfg.type}.en.j2 and {cfg.type}.zh-CN.j2 (docs/development.md, Add a channel)",
            )
        out[name] = factory(cfg, templates, locale=config.locale, time_zone=config.time_zone)
    return out

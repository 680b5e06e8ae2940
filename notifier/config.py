"""The notifier's channels and routes: one YAML file, ``${ENV}`` expanded, validated at start-up.

::

    locale: zh-CN                      # zh-CN (default) or en; a channel may override it
    argocdUrl: https://argocd.example.com   # links in alerts (default: DRIFTGUARD_ARGOCD_URL)
    timeZone: Asia/Shanghai            # times in alerts (IANA name; default UTC)
    channels:
      feishu-sre: {type: feishu, url: "${FEISHU_WEBHOOK}", secret: "${FEISHU_SECRET}"}
      slack-sre:  {type: slack, url: "${SLACK_WEBHOOK}", locale: en}
      oncall:     {type: pagerduty, routing_key: "${PD_ROUTING_KEY}"}
    routes:
      - match: {apps: ["*-production"], projects: [], namespaces: [], classes: [human, missing]}
        channels: [feishu-sre, oncall]
        severity: critical               # optional: overrides the report's severity

Without ``routes``: human, missing and prune-candidate changes go to every channel. Controller,
admission-default and ignored changes never alert.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftguard.drift import ALERTING, PENDING_SYNC
from driftguard.errors import ConfigError
from driftguard.report import SEVERITIES, DriftReport

__all__ = ["LOCALES", "ChannelConfig", "NotifierConfig", "Route", "load_config"]

LOCALES = ("zh-CN", "en")
"""The locales a channel may ask for: the templates (notifier/templates/) and fallback texts exist in each."""
ROUTABLE = (*sorted(ALERTING), PENDING_SYNC)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class ChannelConfig:
    name: str
    type: str
    url: str = ""
    secret: str = field(default="", repr=False)
    token: str = field(default="", repr=False)
    routing_key: str = field(default="", repr=False)
    channel: str = ""
    locale: str = ""


@dataclass(frozen=True)
class Route:
    channels: tuple[str, ...]
    apps: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    classes: tuple[str, ...] = tuple(sorted(ALERTING))
    severity: str = ""

    def matches(self, report: DriftReport, classes: set[str]) -> bool:
        app = report.app
        return (
            _any(self.apps, app.name)
            and _any(self.projects, app.project)
            and _any(self.namespaces, app.destination_namespace)
            and bool(classes & set(self.classes))
        )


def _any(patterns: tuple[str, ...], value: str) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(value, p) for p in patterns)


@dataclass(frozen=True)
class NotifierConfig:
    channels: dict[str, ChannelConfig]
    routes: tuple[Route, ...]
    locale: str = "zh-CN"
    argocd_url: str = ""
    time_zone: str = "UTC"

    def targets(self, report: DriftReport, classes: set[str], *, severity: str = "") -> dict[str, str]:
        """Channel name -> severity (the route's, else ``severity``, else the report's) for the routes this report matches."""
        out: dict[str, str] = {}
        for route in self.routes:
            if route.matches(report, classes):
                for name in route.channels:
                    out.setdefault(name, route.severity or severity or report.severity)
        return out


def _expand(value: Any, where: str) -> Any:
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in os.environ:
                raise ConfigError(name, f"is used by {where} in the notifier config but is not set")
            return os.environ[name]

        return _VAR.sub(sub, value)
    if isinstance(value, dict):
        return {k: _expand(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _strings(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ConfigError(where, "must be a list of strings")
    return tuple(raw)


def load_config(path: str | None, *, argocd_url: str = "") -> NotifierConfig:
    """Read and validate the config file; a mistake stops start-up with a message naming the setting."""
    from driftguard.manifests import safe_load

    if not path:
        raise ConfigError("DRIFTGUARD_NOTIFIER_CONFIG", "is required: a YAML file with channels (and routes)")
    try:
        raw = safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError("DRIFTGUARD_NOTIFIER_CONFIG", f"cannot read {path}: {exc.strerror}") from exc
    except Exception as exc:
        raise ConfigError("DRIFTGUARD_NOTIFIER_CONFIG", f"{path} is not valid YAML: {exc}") from exc
    return parse_config(raw, argocd_url=argocd_url)


def parse_config(raw: Any, *, argocd_url: str = "") -> NotifierConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError("config", "must be a mapping with `channels` (and optionally `routes`, `locale`)")
    unknown = set(raw) - {"channels", "routes", "locale", "argocdUrl", "timeZone"}
    if unknown:
        raise ConfigError(
            "config", f"unknown keys {sorted(unknown)}; known: channels, routes, locale, argocdUrl, timeZone"
        )
    raw = _expand(dict(raw), "config")
    locale = str(raw.get("locale") or "zh-CN")
    if locale not in LOCALES:
        raise ConfigError("config.locale", f"must be one of {', '.join(LOCALES)}")
    channels_raw = raw.get("channels")
    if not isinstance(channels_raw, Mapping) or not channels_raw:
        raise ConfigError("config.channels", "must map at least one channel name to its settings")
    channels: dict[str, ChannelConfig] = {}
    for name, spec in channels_raw.items():
        where = f"config.channels.{name}"
        if not isinstance(spec, Mapping):
            raise ConfigError(where, "must be a mapping")
        extra = set(spec) - {"type", "url", "secret", "token", "routing_key", "channel", "locale"}
        if extra:
            raise ConfigError(where, f"unknown keys {sorted(extra)}")
        ch_locale = str(spec.get("locale") or "")
        if ch_locale and ch_locale not in LOCALES:
            raise ConfigError(f"{where}.locale", f"must be one of {', '.join(LOCALES)}")
        channels[str(name)] = ChannelConfig(
            name=str(name),
            type=str(spec.get("type") or ""),
            url=str(spec.get("url") or ""),
            secret=str(spec.get("secret") or ""),
            token=str(spec.get("token") or ""),
            routing_key=str(spec.get("routing_key") or ""),
            channel=str(spec.get("channel") or ""),
            locale=ch_locale,
        )
    routes: list[Route] = []
    for i, spec in enumerate(raw.get("routes") or []):
        where = f"config.routes[{i}]"
        if not isinstance(spec, Mapping):
            raise ConfigError(where, "must be a mapping with match and channels")
        match = spec.get("match") or {}
        if not isinstance(match, Mapping):
            raise ConfigError(f"{where}.match", "must be a mapping")
        names = _strings(spec.get("channels"), f"{where}.channels")
        if not names:
            raise ConfigError(f"{where}.channels", "must name at least one channel")
        for n in names:
            if n not in channels:
                raise ConfigError(
                    f"{where}.channels", f"unknown channel {n!r}; defined: {', '.join(sorted(channels))}"
                )
        classes = _strings(match.get("classes"), f"{where}.match.classes") or tuple(sorted(ALERTING))
        for c in classes:
            if c not in ROUTABLE:
                raise ConfigError(
                    f"{where}.match.classes", f"{c!r} never alerts; routable classes: {', '.join(ROUTABLE)}"
                )
        severity = str(spec.get("severity") or "")
        if severity and severity not in SEVERITIES:
            raise ConfigError(f"{where}.severity", f"must be one of {', '.join(SEVERITIES)}")
        routes.append(
            Route(
                names,
                _strings(match.get("apps"), f"{where}.match.apps"),
                _strings(match.get("projects"), f"{where}.match.projects"),
                _strings(match.get("namespaces"), f"{where}.match.namespaces"),
                classes,
                severity,
            )
        )
    if not routes:
        routes.append(Route(tuple(channels)))
    url = str(raw.get("argocdUrl") or argocd_url)
    return NotifierConfig(channels, tuple(routes), locale, url, _time_zone(raw.get("timeZone")))


def _time_zone(raw: Any) -> str:
    """An IANA zone name (``Asia/Shanghai``), default UTC; unknown names stop start-up."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    name = str(raw or "UTC")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            "config.timeZone", f"{name!r} is not a known IANA time zone (e.g. Asia/Shanghai, UTC)"
        ) from exc
    return name

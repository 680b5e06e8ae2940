"""The Prometheus queries a gate may run: templates the platform writes (``DRIFTGUARD_PROMETHEUS_QUERIES``).

A YAML file::

    templates:
      grpc-success-rate: >-
        sum(rate(grpc_server_handled_total{service="$service",grpc_code="OK"}[$window]))
        / sum(rate(grpc_server_handled_total{service="$service"}[$window]))

Placeholders are ``$service`` and ``$window`` (``string.Template``: PromQL's own braces need no
escaping); the gate fills them with arguments already checked against their patterns (a service
is letters, digits and ``_ . : -``; a window is ``5m``-like), so no argument can close a label's
quotes or add a selector. ``success-rate`` is built in (non-5xx over all ``http_requests_total``
of a service); the file may replace it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from driftguard.errors import ConfigError

__all__ = ["BUILT_IN", "DEFAULT_TEMPLATE", "SETTING", "QueryTemplate", "load_queries"]

SETTING = "DRIFTGUARD_PROMETHEUS_QUERIES"
DEFAULT_TEMPLATE = "success-rate"
PLACEHOLDERS = frozenset({"service", "window"})


@dataclass(frozen=True)
class QueryTemplate:
    name: str
    text: str

    @property
    def needs(self) -> frozenset[str]:
        return frozenset(_placeholders(self.text))

    def fill(self, args: dict[str, str]) -> str:
        """The query with its placeholders filled; InputError naming an argument it needs and lacks."""
        from driftguard.errors import InputError

        missing = sorted(n for n in self.needs if not args.get(n))
        if missing:
            raise InputError(f"template {self.name!r} needs argument(s) {', '.join(missing)}")
        return Template(self.text).substitute({n: args[n] for n in self.needs})


def _placeholders(text: str) -> list[str]:
    t = Template(text)
    if not t.is_valid():
        raise ValueError("a `$` that is not $service or $window (write $$ for a literal $)")
    return [n for n in t.get_identifiers()]


BUILT_IN = {
    DEFAULT_TEMPLATE: QueryTemplate(
        DEFAULT_TEMPLATE,
        'sum(rate(http_requests_total{service="$service",code!~"5.."}[$window]))'
        ' / sum(rate(http_requests_total{service="$service"}[$window]))',
    )
}


def parse_queries(raw: Any) -> dict[str, QueryTemplate]:
    items = raw.get("templates") if isinstance(raw, dict) else None
    if not isinstance(items, dict) or not items:
        raise ConfigError(SETTING, "must hold `templates:`, a map of name -> PromQL with $service / $window")
    out = dict(BUILT_IN)
    for name, text in items.items():
        import re

        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name):
            raise ConfigError(SETTING, f"template name {str(name)[:70]!r}: lower-case letters, digits and -")
        if not isinstance(text, str) or not text.strip() or len(text) > 4000:
            raise ConfigError(SETTING, f"template {name!r}: a PromQL expression (up to 4,000 characters)")
        try:
            names = set(_placeholders(text))
        except ValueError as exc:
            raise ConfigError(SETTING, f"template {name!r}: {exc}") from exc
        if names - PLACEHOLDERS:
            raise ConfigError(
                SETTING,
                f"template {name!r}: unknown placeholder(s) {', '.join(sorted(names - PLACEHOLDERS))}",
            )
        out[name] = QueryTemplate(name, text.strip())
    return out


def load_queries(path: str) -> dict[str, QueryTemplate]:
    """The built-in template plus the platform's file, checked at start-up."""
    if not path:
        return dict(BUILT_IN)
    from driftguard.manifests import safe_load

    try:
        raw = safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(SETTING, f"{path} cannot be read ({type(exc).__name__})") from exc
    except Exception as exc:
        raise ConfigError(SETTING, f"{path} is not valid YAML ({type(exc).__name__})") from exc
    return parse_queries(raw)

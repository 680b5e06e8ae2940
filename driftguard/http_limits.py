"""The HTTP read limits both services share (driftguard_serve/worker.py), from the environment; checked before gunicorn starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from driftguard.env import from_env, positive
from driftguard.errors import ConfigError

__all__ = ["ENV", "HttpLimits", "http_limits"]


@dataclass(frozen=True)
class HttpLimits:
    read_timeout: float = 10.0
    """Seconds a request's head and body may take to arrive, TLS handshake included (DRIFTGUARD_HTTP_READ_TIMEOUT)."""
    per_client: int = 64
    """Connections one client address may hold open per worker process (DRIFTGUARD_HTTP_MAX_CONNECTIONS_PER_CLIENT)."""
    max_body: int = 8 * 1024 * 1024
    """Largest request body read at all (DRIFTGUARD_HTTP_MAX_BODY_BYTES); each endpoint keeps its own smaller bound."""


ENV = {
    "DRIFTGUARD_HTTP_READ_TIMEOUT": ("read_timeout", positive(float)),
    "DRIFTGUARD_HTTP_MAX_CONNECTIONS_PER_CLIENT": ("per_client", positive(int)),
    "DRIFTGUARD_HTTP_MAX_BODY_BYTES": ("max_body", positive(int)),
}


def http_limits(env: Mapping[str, str]) -> HttpLimits:
    """The limits set in ``env``; ConfigError naming a variable whose value is not a positive number."""
    limits = HttpLimits(**from_env(env, ENV))
    if limits.read_timeout > 300:
        raise ConfigError("DRIFTGUARD_HTTP_READ_TIMEOUT", "must be at most 300 seconds")
    return limits

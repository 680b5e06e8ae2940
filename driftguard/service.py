"""What the two HTTP services share, without importing Flask: env settings, the token rule, gunicorn."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from driftguard.errors import ConfigError

__all__ = ["check_auth", "exec_gunicorn", "from_env", "redact_salt_for"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def from_env(
    env: Mapping[str, str], fields: Mapping[str, tuple[str, Callable[[str], Any]]]
) -> dict[str, Any]:
    """``{attr: value}`` for each set variable in ``fields`` (NAME -> (attr, convert)); a bad value names NAME."""
    out: dict[str, Any] = {}
    for name, (attr, convert) in fields.items():
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        try:
            out[attr] = convert(raw)
        except ValueError as exc:
            raise ConfigError(name, f"cannot use {raw!r}: {exc}") from exc
    return out


def boolean(raw: str) -> bool:
    """true/false, yes/no, on/off, 1/0."""
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("expected true or false")


def check_auth(auth: str, token: str, *, prefix: str) -> None:
    """A service authenticates with a bearer token of 16+ characters unless ``<prefix>_AUTH=none`` says otherwise."""
    if auth not in ("token", "none"):
        raise ConfigError(f"{prefix}_AUTH", f"must be `token` or `none`, got {auth!r}")
    if auth == "token" and len(token) < 16:
        raise ConfigError(
            f"{prefix}_TOKEN",
            f"is required (16+ characters); set {prefix}_AUTH=none only to run without authentication",
        )


def redact_salt_for(token: str) -> bytes:
    """A salt every replica shares (derived from the service's secret token), random when there is none."""
    return hashlib.sha256(b"driftguard-redact\0" + token.encode()).digest() if token else os.urandom(16)


def exec_gunicorn(app: str, *, bind: str, workers: int, threads: int) -> None:
    """Replace this process with gunicorn serving ``app`` (e.g. ``notifier.app:create_app()``)."""
    argv = [
        sys.executable,
        "-m",
        "gunicorn",
        "--bind",
        bind,
        "--workers",
        str(workers),
        "--threads",
        str(threads),
    ]
    argv += ["--worker-class", "gthread", "--access-logfile", "-", "--graceful-timeout", "20", app]
    os.execv(sys.executable, argv)  # noqa: S606 - fixed argv, no shell

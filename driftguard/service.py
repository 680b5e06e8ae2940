"""What the two HTTP services share, without importing Flask: the token rule, the redaction key, gunicorn."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from driftguard.errors import ConfigError
from driftguard.http_limits import http_limits
from driftguard.metrics import MULTIPROC_ENV, prepare_multiprocess_dir

__all__ = [
    "REDACT_KEY_ENV",
    "bearer_matches",
    "check_auth",
    "check_redact_key",
    "exec_gunicorn",
    "refuse_old_salt",
    "secret_matches",
]

REDACT_KEY_ENV = "DRIFTGUARD_REDACT_KEY"
WORKER_CLASS = "driftguard_serve.worker.GuardedWorker"
_REDACT_KEY_MIN = 32


def check_auth(auth: str, token: str, *, prefix: str) -> None:
    """A service authenticates with a bearer token of 16+ characters unless ``<prefix>_AUTH=none`` says otherwise."""
    if auth not in ("token", "none"):
        raise ConfigError(f"{prefix}_AUTH", f"must be `token` or `none`, got {auth!r}")
    if auth == "token" and len(token) < 16:
        raise ConfigError(
            f"{prefix}_TOKEN",
            f"is required (16+ characters); set {prefix}_AUTH=none only to run without authentication",
        )


def bearer_matches(header: str, *tokens: str) -> bool:
    """Whether an ``Authorization`` header carries one of ``tokens`` (constant time; empty ones never match)."""
    return secret_matches(header, *(f"Bearer {t}" for t in tokens if t))


def secret_matches(given: str, *secrets: str) -> bool:
    """Whether ``given`` is one of ``secrets``, compared in constant time; empty secrets never match.

    Every comparison of something a client sent with a token or a value derived from one goes
    through here (or ``bearer_matches``), never ``==``.
    """
    import hmac

    return any(s and hmac.compare_digest(given.encode(), s.encode()) for s in secrets)


def check_redact_key(key: bytes, *, tokens: tuple[str, ...]) -> bytes:
    """The HMAC key of masked values, as the platform gave it: required, 32+ characters, no token's value.

    Why a key of its own: a mask (``***(sha256:...)``) is an HMAC of the value, so whoever holds
    the key can test guesses offline. A key derived from a bearer token was held by everyone the
    token was handed to (every Rollout namespace, Prometheus' scrape config). One Secret value
    shared by the notifier and the analysis provider makes a value mask the same in an alert and in
    a gate's answer.
    """
    hint = (
        f"{_REDACT_KEY_MIN}+ random characters the platform provides (e.g. `openssl rand -hex 32`),"
        " the same Secret value for the notifier and the analysis provider"
    )
    if not key:
        raise ConfigError(REDACT_KEY_ENV, f"is required: {hint}")
    if len(key) < _REDACT_KEY_MIN:
        raise ConfigError(REDACT_KEY_ENV, f"is too short ({len(key)} characters): {hint}")
    if any(t and key == t.encode() for t in tokens):
        raise ConfigError(REDACT_KEY_ENV, f"must not be a bearer token's value: {hint}")
    return key


def refuse_old_salt(env: Mapping[str, str]) -> None:
    """``DRIFTGUARD_REDACT_SALT`` (before issue 31) is refused by name: an upgrade never keeps it silently."""
    if env.get("DRIFTGUARD_REDACT_SALT"):
        raise ConfigError(
            "DRIFTGUARD_REDACT_SALT", f"is no longer read: put a random secret in {REDACT_KEY_ENV} instead"
        )


def exec_gunicorn(
    app: str, *, bind: str, workers: int, threads: int, certfile: str = "", keyfile: str = ""
) -> None:
    """Replace this process with gunicorn serving ``app`` (e.g. ``notifier.app:create_app()``).

    ``certfile``/``keyfile``: serve TLS (gunicorn's own ssl options; they apply to every bind, so a
    service that needs plain HTTP and TLS runs two of these, e.g. the notifier's admission listener).
    """
    http_limits(os.environ)  # a bad DRIFTGUARD_HTTP_* stops here, named, not in every worker
    if not os.environ.get(MULTIPROC_ENV):
        # the workers' metric files: one fresh private folder per service start
        prepare_multiprocess_dir(Path(tempfile.mkdtemp(prefix="driftguard-metrics-")))
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
    # gthread with read deadlines and a per-client bound (driftguard_serve/worker.py): a slow client
    # never holds a thread; named by string, so this library never imports gunicorn
    argv += ["--worker-class", WORKER_CLASS, "--access-logfile", "-", "--graceful-timeout", "20"]
    if certfile or keyfile:
        argv += ["--certfile", certfile, "--keyfile", keyfile]
    # child_exit keeps prometheus-client's multiprocess metrics honest (driftguard/metrics.py)
    argv += ["--config", "python:driftguard.gunicorn_conf", app]
    os.execv(sys.executable, argv)  # noqa: S606 - fixed argv, no shell

"""What the two HTTP services share, without importing Flask: the token rule, the redaction salt, gunicorn."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

from driftguard.errors import ConfigError
from driftguard.metrics import MULTIPROC_ENV, prepare_multiprocess_dir

__all__ = ["bearer_matches", "check_auth", "exec_gunicorn", "redact_salt_for"]


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
    import hmac

    return any(t and hmac.compare_digest(header.encode(), f"Bearer {t}".encode()) for t in tokens)


def redact_salt_for(token: str) -> bytes:
    """A salt every replica shares (derived from the service's secret token), random when there is none."""
    return hashlib.sha256(b"driftguard-redact\0" + token.encode()).digest() if token else os.urandom(16)


def exec_gunicorn(
    app: str, *, bind: str, workers: int, threads: int, certfile: str = "", keyfile: str = ""
) -> None:
    """Replace this process with gunicorn serving ``app`` (e.g. ``notifier.app:create_app()``).

    ``certfile``/``keyfile``: serve TLS (gunicorn's own ssl options; they apply to every bind, so a
    service that needs plain HTTP and TLS runs two of these, e.g. the notifier's admission listener).
    """
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
    argv += ["--worker-class", "gthread", "--access-logfile", "-", "--graceful-timeout", "20"]
    if certfile or keyfile:
        argv += ["--certfile", certfile, "--keyfile", keyfile]
    # child_exit keeps prometheus-client's multiprocess metrics honest (driftguard/metrics.py)
    argv += ["--config", "python:driftguard.gunicorn_conf", app]
    os.execv(sys.executable, argv)  # noqa: S606 - fixed argv, no shell

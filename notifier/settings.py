"""The notifier's settings: one frozen object, read once from ``DRIFTGUARD_NOTIFIER_*`` (and _ARGOCD_*)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftguard.argocd import ArgoCDSettings
from driftguard.env import boolean, from_env
from driftguard.errors import ConfigError
from driftguard.service import check_auth, check_redact_key, refuse_old_salt

__all__ = ["PARTS", "NotifierSettings"]

PARTS = ("alerts", "audit", "admission", "journal", "whois")
"""What a notifier process can serve (``create_app(parts=...)``, ``driftguard-notifier --part``):
``alerts`` the Argo CD webhook, channels and the delivery worker (the webhook token, the config and
its channel secrets, Argo CD); ``audit`` ``POST /v1/audit``; ``admission`` ``POST /v1/admission``;
``journal`` ``/v1/incidents`` and ``/incidents``; ``whois`` ``POST /v1/identities/match``. The probes,
``/metrics`` and ``/openapi.json`` are in every process. The main listener runs them all, the
admission listener only ``admission``."""


@dataclass(frozen=True)
class NotifierSettings:
    """Everything the notifier reads from its environment; validated at construction."""

    token: str = field(default="", repr=False)
    """Bearer token Argo CD Notifications must send (DRIFTGUARD_NOTIFIER_TOKEN)."""
    auth: str = "token"
    """`token` (default) or `none` (DRIFTGUARD_NOTIFIER_AUTH=none: explicit opt-out, for a lab)."""
    config_file: str = ""
    """The channels/routes YAML (DRIFTGUARD_NOTIFIER_CONFIG)."""
    outbox: Path = Path("/var/lib/driftguard/outbox.sqlite3")
    """SQLite outbox path, on a PVC in the manifests (DRIFTGUARD_NOTIFIER_OUTBOX)."""
    database_url: str = field(default="", repr=False)
    """``postgresql://...``: a PostgreSQL outbox shared by several replicas instead of SQLite
    (DRIFTGUARD_NOTIFIER_DATABASE_URL; from a Secret; libpq TLS options pass through)."""
    intake_window: float = 300.0
    """Seconds within which the same notification (app, trigger, revision, status) is stored once
    however many times or replicas receive it (DRIFTGUARD_NOTIFIER_INTAKE_WINDOW; 0: off)."""
    retention: float = 7 * 86400.0
    """Finished notifications and messages are deleted after this many seconds (DRIFTGUARD_NOTIFIER_RETENTION)."""
    max_body_bytes: int = 8 * 1024 * 1024
    """Largest notification body accepted (DRIFTGUARD_NOTIFIER_MAX_BODY_BYTES). The shipped templates
    send the app's ``status.resources`` and its operation's ``syncResult`` whole (about 200 bytes a
    resource): 8 MiB holds an app of some 20,000 resources; the outbox keeps only the entries it uses."""
    dedup_window: float = 600.0
    """Seconds a resolve is queued once per app, and how long a closed episode's dedup memory is
    kept (DRIFTGUARD_NOTIFIER_DEDUP_WINDOW). A drift is alerted once per episode whatever the time;
    0 turns that dedup off (load tests)."""
    dead_letter_after: float = 86400.0
    """A message still undelivered after this many seconds is dead-lettered (DRIFTGUARD_NOTIFIER_DEAD_LETTER_AFTER)."""
    recheck_interval: float = 60.0
    """While an app has open drift or is still OutOfSync, re-check it this often: Argo CD fires its trigger once
    per episode (DRIFTGUARD_NOTIFIER_RECHECK_INTERVAL)."""
    max_attempts: int = 8
    """Expansion/rendering attempts before the fallback alert and the dead letter (DRIFTGUARD_NOTIFIER_MAX_ATTEMPTS)."""
    max_retry_after: float = 300.0
    """Longest receiver Retry-After honoured, in seconds (DRIFTGUARD_NOTIFIER_MAX_RETRY_AFTER)."""
    templates_dir: str = ""
    """A directory of template overrides (DRIFTGUARD_NOTIFIER_TEMPLATES)."""
    argocd_cm_file: str = ""
    """A mounted argocd-cm (YAML) for system-level ignoreDifferences (DRIFTGUARD_ARGOCD_CM_FILE)."""
    redact_key: bytes = field(default=b"", repr=False)
    """HMAC key of the short hashes in masked values (DRIFTGUARD_REDACT_KEY): required, a random secret
    the platform provides, the same value for the notifier and the analysis provider."""
    lease: float = 30.0
    """Seconds a process holds a claimed piece of work; a crashed process's work is picked up after it
    (DRIFTGUARD_NOTIFIER_LEASE). Sends time out well within it."""
    worker: bool = True
    """Run the delivery worker thread in each process (DRIFTGUARD_NOTIFIER_WORKER=false to run none)."""
    audit_token: str = field(default="", repr=False)
    """Bearer token the API server's audit webhook (and admission webhook) must send; empty: /v1/audit is off
    (DRIFTGUARD_NOTIFIER_AUDIT_TOKEN)."""
    admission_auth: str = "token"
    """`token`: /v1/admission needs the audit token; `none`: managed clusters whose API server cannot send one,
    reachable only over the TLS port (DRIFTGUARD_NOTIFIER_ADMISSION_AUTH)."""
    identity_retention: float = 86400.0
    """Seconds identity records are kept (DRIFTGUARD_NOTIFIER_IDENTITY_RETENTION)."""
    identity_max_rows: int = 100_000
    """Most identity records kept per source (audit, admission); the oldest of that source go first under an
    event storm, so a flood of one never evicts the other (DRIFTGUARD_NOTIFIER_IDENTITY_MAX_ROWS)."""
    read_token: str = field(default="", repr=False)
    """Bearer token for /v1/incidents and /incidents, separate from the webhook token (DRIFTGUARD_NOTIFIER_READ_TOKEN)."""
    read_trusted_header: str = ""
    """A header an authenticating proxy sets (e.g. X-Forwarded-User): its presence lets a reader in
    (DRIFTGUARD_NOTIFIER_READ_TRUSTED_HEADER). Only behind a proxy that strips it from clients."""
    argocd: ArgoCDSettings | None = None
    parts: tuple[str, ...] = PARTS
    """What this process serves (not from the environment: ``driftguard-notifier --part``)."""

    def __post_init__(self) -> None:
        unknown = [p for p in self.parts if p not in PARTS]
        if unknown or not self.parts:
            raise ConfigError(
                "--part", f"must name parts among {', '.join(PARTS)}, got {', '.join(unknown) or 'none'}"
            )
        if "alerts" in self.parts or self.auth not in (
            "token",
            "none",
        ):  # the webhook's token: a process without the webhook needs none
            check_auth(self.auth, self.token, prefix="DRIFTGUARD_NOTIFIER")
        if self.lease < 1:
            raise ConfigError("DRIFTGUARD_NOTIFIER_LEASE", "must be at least 1 second")
        if self.max_attempts < 1:
            raise ConfigError("DRIFTGUARD_NOTIFIER_MAX_ATTEMPTS", "must be at least 1")
        if self.max_retry_after < 0 or self.recheck_interval <= 0:
            raise ConfigError("DRIFTGUARD_NOTIFIER_*", "durations must be positive")
        if self.max_body_bytes <= 0 or self.dedup_window < 0 or self.dead_letter_after <= 0:
            raise ConfigError("DRIFTGUARD_NOTIFIER_*", "sizes and durations must be positive")
        for name, value in (("AUDIT_TOKEN", self.audit_token), ("READ_TOKEN", self.read_token)):
            if value and len(value) < 16:
                raise ConfigError(f"DRIFTGUARD_NOTIFIER_{name}", "must be 16+ characters")
        if self.read_token and self.read_token in (self.token, self.audit_token):
            raise ConfigError(
                "DRIFTGUARD_NOTIFIER_READ_TOKEN", "must differ from the webhook and audit tokens"
            )
        if self.admission_auth not in ("token", "none"):
            raise ConfigError("DRIFTGUARD_NOTIFIER_ADMISSION_AUTH", "must be `token` or `none`")
        if self.identity_retention <= 0 or self.identity_max_rows < 1:
            raise ConfigError("DRIFTGUARD_NOTIFIER_IDENTITY_*", "retention and row limit must be positive")
        if self.database_url and not self.database_url.startswith(("postgresql://", "postgres://")):
            raise ConfigError("DRIFTGUARD_NOTIFIER_DATABASE_URL", "must be a postgresql:// URL")
        if self.intake_window < 0 or self.retention < self.dead_letter_after:
            raise ConfigError(
                "DRIFTGUARD_NOTIFIER_RETENTION",
                "must be at least the dead-letter window (and the intake window >= 0)",
            )
        check_redact_key(self.redact_key, tokens=(self.token, self.audit_token, self.read_token))

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, parts: tuple[str, ...] = PARTS
    ) -> NotifierSettings:
        env = os.environ if environ is None else environ
        refuse_old_salt(env)
        kw = from_env(env, ENV)
        if "alerts" in parts:  # Argo CD's URL and token: only the alert path reads Argo CD
            kw["argocd"] = ArgoCDSettings.from_env(env)
        return cls(**kw, parts=tuple(parts))


ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    "DRIFTGUARD_NOTIFIER_TOKEN": ("token", str),
    "DRIFTGUARD_NOTIFIER_AUTH": ("auth", str.strip),
    "DRIFTGUARD_NOTIFIER_CONFIG": ("config_file", str),
    "DRIFTGUARD_NOTIFIER_TEMPLATES": ("templates_dir", str),
    "DRIFTGUARD_ARGOCD_CM_FILE": ("argocd_cm_file", str),
    "DRIFTGUARD_NOTIFIER_OUTBOX": ("outbox", Path),
    "DRIFTGUARD_NOTIFIER_DATABASE_URL": ("database_url", str.strip),
    "DRIFTGUARD_NOTIFIER_INTAKE_WINDOW": ("intake_window", float),
    "DRIFTGUARD_NOTIFIER_RETENTION": ("retention", float),
    "DRIFTGUARD_NOTIFIER_MAX_BODY_BYTES": ("max_body_bytes", int),
    "DRIFTGUARD_NOTIFIER_DEDUP_WINDOW": ("dedup_window", float),
    "DRIFTGUARD_NOTIFIER_DEAD_LETTER_AFTER": ("dead_letter_after", float),
    "DRIFTGUARD_NOTIFIER_RECHECK_INTERVAL": ("recheck_interval", float),
    "DRIFTGUARD_NOTIFIER_MAX_ATTEMPTS": ("max_attempts", int),
    "DRIFTGUARD_NOTIFIER_MAX_RETRY_AFTER": ("max_retry_after", float),
    "DRIFTGUARD_NOTIFIER_LEASE": ("lease", float),
    "DRIFTGUARD_REDACT_KEY": ("redact_key", str.encode),
    "DRIFTGUARD_NOTIFIER_WORKER": ("worker", boolean),
    "DRIFTGUARD_NOTIFIER_AUDIT_TOKEN": ("audit_token", str),
    "DRIFTGUARD_NOTIFIER_ADMISSION_AUTH": ("admission_auth", str.strip),
    "DRIFTGUARD_NOTIFIER_IDENTITY_RETENTION": ("identity_retention", float),
    "DRIFTGUARD_NOTIFIER_IDENTITY_MAX_ROWS": ("identity_max_rows", int),
    "DRIFTGUARD_NOTIFIER_READ_TOKEN": ("read_token", str),
    "DRIFTGUARD_NOTIFIER_READ_TRUSTED_HEADER": ("read_trusted_header", str.strip),
}

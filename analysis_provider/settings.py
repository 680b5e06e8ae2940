"""The analysis provider's settings: one frozen object, read once from ``DRIFTGUARD_ANALYSIS_*``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from analysis_provider.callers import Callers, load_callers
from analysis_provider.queries import QueryTemplate, load_queries
from driftguard.argocd import ArgoCDSettings
from driftguard.env import from_env
from driftguard.errors import ConfigError
from driftguard.service import check_auth, check_redact_key, refuse_old_salt

__all__ = ["AnalysisSettings"]


@dataclass(frozen=True)
class AnalysisSettings:
    """Validated at construction: a bad setting stops start-up naming itself."""

    token: str = field(default="", repr=False)
    """The single-team setting (DRIFTGUARD_ANALYSIS_TOKEN): one bearer token that may ask about every
    Application, a caller with ``projects: ["*"]``. Several teams: DRIFTGUARD_ANALYSIS_CALLERS."""
    callers_file: str = ""
    """A YAML file of callers, each with its own token and the projects and apps it may ask about
    (DRIFTGUARD_ANALYSIS_CALLERS; analysis_provider/callers.py)."""
    queries_file: str = ""
    """The Prometheus query templates a success-rate gate may name (DRIFTGUARD_PROMETHEUS_QUERIES;
    analysis_provider/queries.py); the built-in ``success-rate`` without it."""
    auth: str = "token"
    """`token` or `none` (DRIFTGUARD_ANALYSIS_AUTH=none, explicit opt-out)."""
    prometheus_url: str = ""
    """Prometheus base URL for the success-rate gate (DRIFTGUARD_PROMETHEUS_URL)."""
    prometheus_token: str = field(default="", repr=False)
    """Optional bearer token for Prometheus (DRIFTGUARD_PROMETHEUS_TOKEN)."""
    timeout: float = 4.0
    """Seconds for the whole answer of one gate request, ``all`` and every upstream read included
    (DRIFTGUARD_ANALYSIS_TIMEOUT); keep it under the AnalysisTemplate's timeoutSeconds (10 s at most)."""
    cache_ttl: float = 5.0
    """Seconds a verdict is reused for the same gate and arguments (DRIFTGUARD_ANALYSIS_CACHE_TTL)."""
    freeze_file: str = ""
    """YAML list of extra freeze windows (Argo CD syncWindow format) (DRIFTGUARD_ANALYSIS_FREEZE_FILE)."""
    argocd_cm_file: str = ""
    """argocd-cm for system-level ignoreDifferences (DRIFTGUARD_ARGOCD_CM_FILE)."""
    redact_key: bytes = field(default=b"", repr=False)
    """HMAC key of the short hashes in masked values (DRIFTGUARD_REDACT_KEY): required, a random secret
    the platform provides, the same value for the notifier and the analysis provider."""
    notifier_url: str = ""
    """The notifier's base URL: the drift gate asks its identity store who made a change
    (DRIFTGUARD_ANALYSIS_NOTIFIER_URL; empty: the gate names the field manager only)."""
    notifier_read_token: str = field(default="", repr=False)
    """The notifier's read token (DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN), or from a file (_FILE below)."""
    notifier_read_token_file: str = ""
    """A file holding the read token, e.g. a mounted Secret key (DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN_FILE)."""
    notifier_ca_file: str = ""
    """CA bundle for an https notifier URL (DRIFTGUARD_ANALYSIS_NOTIFIER_CA_FILE)."""
    notifier_timeout: float = 1.0
    """Seconds the identity lookup may take, within the request's own timeout (DRIFTGUARD_ANALYSIS_NOTIFIER_TIMEOUT)."""
    argocd: ArgoCDSettings | None = None
    callers: Callers = field(default=Callers(()), repr=False, compare=False)
    """Loaded from the two settings above at construction (not a setting of its own)."""
    queries: dict[str, QueryTemplate] = field(default_factory=dict, repr=False, compare=False)
    """Loaded from DRIFTGUARD_PROMETHEUS_QUERIES at construction."""

    def __post_init__(self) -> None:
        if self.auth == "token" and not self.token and not self.callers_file:
            raise ConfigError(
                "DRIFTGUARD_ANALYSIS_CALLERS",
                "is required (each team's token and the projects and apps it may ask about), or"
                " DRIFTGUARD_ANALYSIS_TOKEN for a single team (a caller of every project)",
            )
        if self.token or self.auth != "token":
            check_auth(self.auth, self.token, prefix="DRIFTGUARD_ANALYSIS")
        object.__setattr__(
            self,
            "callers",
            load_callers(self.callers_file, single_token=self.token if self.auth == "token" else ""),
        )
        object.__setattr__(self, "queries", load_queries(self.queries_file))
        if self.prometheus_url and not self.prometheus_url.startswith(("http://", "https://")):
            raise ConfigError("DRIFTGUARD_PROMETHEUS_URL", "must be an http(s) URL")
        if not 0 < self.timeout < 10:
            raise ConfigError(
                "DRIFTGUARD_ANALYSIS_TIMEOUT", "must be between 0 and 10 seconds (Rollouts waits 10 s)"
            )
        if self.cache_ttl < 0:
            raise ConfigError("DRIFTGUARD_ANALYSIS_CACHE_TTL", "must be 0 or more")
        check_redact_key(self.redact_key, tokens=tuple(c.token for c in self.callers.entries))
        self._check_notifier()

    def _check_notifier(self) -> None:
        """The identity lookup's settings: all or nothing, the token read from its file once here."""
        token_set = bool(self.notifier_read_token or self.notifier_read_token_file)
        if not self.notifier_url:
            if token_set or self.notifier_ca_file:
                raise ConfigError(
                    "DRIFTGUARD_ANALYSIS_NOTIFIER_URL", "is required when a notifier read token or CA is set"
                )
            return
        url = urlsplit(self.notifier_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ConfigError("DRIFTGUARD_ANALYSIS_NOTIFIER_URL", "must be an http(s) URL with a host")
        if url.username is not None or url.password is not None or url.query or url.fragment:
            raise ConfigError(
                "DRIFTGUARD_ANALYSIS_NOTIFIER_URL",
                "must be a base URL without credentials, query or fragment (the token has its own setting)",
            )
        if self.notifier_read_token and self.notifier_read_token_file:
            raise ConfigError(
                "DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN", "set it or _READ_TOKEN_FILE, not both"
            )
        if self.notifier_read_token_file:
            try:
                token = Path(self.notifier_read_token_file).read_text().strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(
                    "DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN_FILE", f"cannot be read ({type(exc).__name__})"
                ) from exc
            object.__setattr__(self, "notifier_read_token", token)
        where = "_FILE" if self.notifier_read_token_file else ""
        if len(self.notifier_read_token) < 16 or any(c.isspace() for c in self.notifier_read_token):
            raise ConfigError(
                f"DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN{where}",
                "is required with DRIFTGUARD_ANALYSIS_NOTIFIER_URL: the notifier's read token (16+ characters, no spaces)",
            )
        if self.notifier_ca_file and not Path(self.notifier_ca_file).is_file():
            raise ConfigError(
                "DRIFTGUARD_ANALYSIS_NOTIFIER_CA_FILE", f"{self.notifier_ca_file} is not a file"
            )
        if not 0 < self.notifier_timeout < self.timeout:
            raise ConfigError(
                "DRIFTGUARD_ANALYSIS_NOTIFIER_TIMEOUT",
                "must be more than 0 and less than DRIFTGUARD_ANALYSIS_TIMEOUT (the lookup never holds the verdict)",
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AnalysisSettings:
        env = os.environ if environ is None else environ
        refuse_old_salt(env)
        kw = from_env(env, ENV)
        kw["argocd"] = ArgoCDSettings.from_env(env)
        return cls(**kw)


ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    "DRIFTGUARD_ANALYSIS_TOKEN": ("token", str),
    "DRIFTGUARD_ANALYSIS_AUTH": ("auth", str.strip),
    "DRIFTGUARD_ANALYSIS_CALLERS": ("callers_file", str.strip),
    "DRIFTGUARD_PROMETHEUS_QUERIES": ("queries_file", str.strip),
    "DRIFTGUARD_PROMETHEUS_URL": ("prometheus_url", str),
    "DRIFTGUARD_PROMETHEUS_TOKEN": ("prometheus_token", str),
    "DRIFTGUARD_ANALYSIS_FREEZE_FILE": ("freeze_file", str),
    "DRIFTGUARD_ARGOCD_CM_FILE": ("argocd_cm_file", str),
    "DRIFTGUARD_ANALYSIS_TIMEOUT": ("timeout", float),
    "DRIFTGUARD_ANALYSIS_CACHE_TTL": ("cache_ttl", float),
    "DRIFTGUARD_REDACT_KEY": ("redact_key", str.encode),
    "DRIFTGUARD_ANALYSIS_NOTIFIER_URL": ("notifier_url", str.strip),
    "DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN": ("notifier_read_token", str.strip),
    "DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN_FILE": ("notifier_read_token_file", str.strip),
    "DRIFTGUARD_ANALYSIS_NOTIFIER_CA_FILE": ("notifier_ca_file", str.strip),
    "DRIFTGUARD_ANALYSIS_NOTIFIER_TIMEOUT": ("notifier_timeout", float),
}

"""The analysis provider's settings: one frozen object, read once from ``DRIFTGUARD_ANALYSIS_*``."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from driftguard.argocd import ArgoCDSettings
from driftguard.errors import ConfigError

__all__ = ["AnalysisSettings"]


@dataclass(frozen=True)
class AnalysisSettings:
    """Validated at construction: a bad setting stops start-up naming itself."""

    token: str = field(default="", repr=False)
    """Bearer token the AnalysisTemplate sends (DRIFTGUARD_ANALYSIS_TOKEN)."""
    auth: str = "token"
    """`token` or `none` (DRIFTGUARD_ANALYSIS_AUTH=none, explicit opt-out)."""
    prometheus_url: str = ""
    """Prometheus base URL for the success-rate gate (DRIFTGUARD_PROMETHEUS_URL)."""
    prometheus_token: str = field(default="", repr=False)
    """Optional bearer token for Prometheus (DRIFTGUARD_PROMETHEUS_TOKEN)."""
    timeout: float = 4.0
    """Seconds per upstream request, below Rollouts' default 10 s (DRIFTGUARD_ANALYSIS_TIMEOUT)."""
    cache_ttl: float = 5.0
    """Seconds a verdict is reused for the same gate and arguments (DRIFTGUARD_ANALYSIS_CACHE_TTL)."""
    freeze_file: str = ""
    """YAML list of extra freeze windows (Argo CD syncWindow format) (DRIFTGUARD_ANALYSIS_FREEZE_FILE)."""
    argocd_cm_file: str = ""
    """argocd-cm for system-level ignoreDifferences (DRIFTGUARD_ARGOCD_CM_FILE)."""
    redact_salt: bytes = field(default=b"", repr=False)
    argocd: ArgoCDSettings | None = None

    def __post_init__(self) -> None:
        if self.auth not in ("token", "none"):
            raise ConfigError("DRIFTGUARD_ANALYSIS_AUTH", f"must be `token` or `none`, got {self.auth!r}")
        if self.auth == "token" and len(self.token) < 16:
            raise ConfigError(
                "DRIFTGUARD_ANALYSIS_TOKEN",
                "is required (16+ characters); set DRIFTGUARD_ANALYSIS_AUTH=none only to run without authentication",
            )
        if self.prometheus_url and not self.prometheus_url.startswith(("http://", "https://")):
            raise ConfigError("DRIFTGUARD_PROMETHEUS_URL", "must be an http(s) URL")
        if not 0 < self.timeout < 10:
            raise ConfigError(
                "DRIFTGUARD_ANALYSIS_TIMEOUT", "must be between 0 and 10 seconds (Rollouts waits 10 s)"
            )
        if self.cache_ttl < 0:
            raise ConfigError("DRIFTGUARD_ANALYSIS_CACHE_TTL", "must be 0 or more")
        if not self.redact_salt:
            salt = (
                hashlib.sha256(b"driftguard-redact\0" + self.token.encode()).digest()
                if self.token
                else os.urandom(16)
            )
            object.__setattr__(self, "redact_salt", salt)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AnalysisSettings:
        env = os.environ if environ is None else environ
        kw: dict[str, object] = {}
        for name, attr in (
            ("DRIFTGUARD_ANALYSIS_TOKEN", "token"),
            ("DRIFTGUARD_ANALYSIS_AUTH", "auth"),
            ("DRIFTGUARD_PROMETHEUS_URL", "prometheus_url"),
            ("DRIFTGUARD_PROMETHEUS_TOKEN", "prometheus_token"),
            ("DRIFTGUARD_ANALYSIS_FREEZE_FILE", "freeze_file"),
            ("DRIFTGUARD_ARGOCD_CM_FILE", "argocd_cm_file"),
        ):
            if env.get(name):
                kw[attr] = env[name].strip() if attr == "auth" else env[name]
        for name, attr in (
            ("DRIFTGUARD_ANALYSIS_TIMEOUT", "timeout"),
            ("DRIFTGUARD_ANALYSIS_CACHE_TTL", "cache_ttl"),
        ):
            if env.get(name):
                try:
                    kw[attr] = float(env[name])
                except ValueError as exc:
                    raise ConfigError(name, f"not a number: {env[name]!r}") from exc
        if env.get("DRIFTGUARD_REDACT_SALT"):
            kw["redact_salt"] = env["DRIFTGUARD_REDACT_SALT"].encode()
        kw["argocd"] = ArgoCDSettings.from_env(env)
        return cls(**kw)  # type: ignore[arg-type]

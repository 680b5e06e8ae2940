"""The analysis provider's settings: one frozen object, read once from ``DRIFTGUARD_ANALYSIS_*``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from driftguard.argocd import ArgoCDSettings
from driftguard.env import from_env
from driftguard.errors import ConfigError
from driftguard.service import check_auth, redact_salt_for

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
    """Seconds for the whole answer of one gate request, ``all`` and every upstream read included
    (DRIFTGUARD_ANALYSIS_TIMEOUT); keep it under the AnalysisTemplate's timeoutSeconds (10 s at most)."""
    cache_ttl: float = 5.0
    """Seconds a verdict is reused for the same gate and arguments (DRIFTGUARD_ANALYSIS_CACHE_TTL)."""
    freeze_file: str = ""
    """YAML list of extra freeze windows (Argo CD syncWindow format) (DRIFTGUARD_ANALYSIS_FREEZE_FILE)."""
    argocd_cm_file: str = ""
    """argocd-cm for system-level ignoreDifferences (DRIFTGUARD_ARGOCD_CM_FILE)."""
    redact_salt: bytes = field(default=b"", repr=False)
    argocd: ArgoCDSettings | None = None

    def __post_init__(self) -> None:
        check_auth(self.auth, self.token, prefix="DRIFTGUARD_ANALYSIS")
        if self.prometheus_url and not self.prometheus_url.startswith(("http://", "https://")):
            raise ConfigError("DRIFTGUARD_PROMETHEUS_URL", "must be an http(s) URL")
        if not 0 < self.timeout < 10:
            raise ConfigError(
                "DRIFTGUARD_ANALYSIS_TIMEOUT", "must be between 0 and 10 seconds (Rollouts waits 10 s)"
            )
        if self.cache_ttl < 0:
            raise ConfigError("DRIFTGUARD_ANALYSIS_CACHE_TTL", "must be 0 or more")
        if not self.redact_salt:
            object.__setattr__(self, "redact_salt", redact_salt_for(self.token))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AnalysisSettings:
        env = os.environ if environ is None else environ
        kw = from_env(env, ENV)
        kw["argocd"] = ArgoCDSettings.from_env(env)
        return cls(**kw)


ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    "DRIFTGUARD_ANALYSIS_TOKEN": ("token", str),
    "DRIFTGUARD_ANALYSIS_AUTH": ("auth", str.strip),
    "DRIFTGUARD_PROMETHEUS_URL": ("prometheus_url", str),
    "DRIFTGUARD_PROMETHEUS_TOKEN": ("prometheus_token", str),
    "DRIFTGUARD_ANALYSIS_FREEZE_FILE": ("freeze_file", str),
    "DRIFTGUARD_ARGOCD_CM_FILE": ("argocd_cm_file", str),
    "DRIFTGUARD_ANALYSIS_TIMEOUT": ("timeout", float),
    "DRIFTGUARD_ANALYSIS_CACHE_TTL": ("cache_ttl", float),
    "DRIFTGUARD_REDACT_SALT": ("redact_salt", str.encode),
}

"""The redaction key (issue 31): a random secret the platform provides, never derived from a token.

The attack: masked Secret values (``***(sha256:...)``) were reversed offline from a dictionary,
because the HMAC key was derived from the analysis token (held in every Rollout namespace) or
the webhook token (handed to Prometheus by the ServiceMonitor). Now both services refuse to start
without ``DRIFTGUARD_REDACT_KEY``, and a dictionary built with any token no longer matches.
"""

from __future__ import annotations

import hashlib
import hmac
import re

import pytest

from analysis_provider.settings import AnalysisSettings
from driftguard.diff import dumps
from driftguard.errors import ConfigError
from driftguard.redact import Redactor
from notifier.settings import NotifierSettings

KEY = "redact-key-for-tests-0123456789abcdef"
NOTIFIER = {
    "DRIFTGUARD_NOTIFIER_TOKEN": "notifier-token-0123456789",
    "DRIFTGUARD_ARGOCD_URL": "https://argocd.example.com",
    "DRIFTGUARD_ARGOCD_TOKEN": "argocd-token",
}
ANALYSIS = {
    "DRIFTGUARD_ANALYSIS_TOKEN": "analysis-token-0123456789",
    "DRIFTGUARD_ARGOCD_URL": "https://argocd.example.com",
    "DRIFTGUARD_ARGOCD_TOKEN": "argocd-token",
}


@pytest.mark.parametrize("settings, env", [(NotifierSettings, NOTIFIER), (AnalysisSettings, ANALYSIS)])
def test_start_up_names_the_missing_or_weak_key(settings: type, env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"DRIFTGUARD_REDACT_KEY.*required"):
        settings.from_env(env)
    with pytest.raises(ConfigError, match=r"DRIFTGUARD_REDACT_KEY.*too short"):
        settings.from_env({**env, "DRIFTGUARD_REDACT_KEY": "short"})
    token = next(v for k, v in env.items() if k.endswith("_TOKEN")) + "-" * 10
    token_name = next(k for k in env if k.endswith("_TOKEN"))
    with pytest.raises(ConfigError, match=r"DRIFTGUARD_REDACT_KEY.*token"):
        settings.from_env({**env, token_name: token, "DRIFTGUARD_REDACT_KEY": token})
    with pytest.raises(ConfigError, match=r"DRIFTGUARD_REDACT_SALT.*DRIFTGUARD_REDACT_KEY"):
        settings.from_env({**env, "DRIFTGUARD_REDACT_KEY": KEY, "DRIFTGUARD_REDACT_SALT": "x" * 40})
    ok = settings.from_env({**env, "DRIFTGUARD_REDACT_KEY": KEY})
    assert ok.redact_key == KEY.encode()
    assert KEY not in repr(ok)


def test_both_services_mask_a_value_the_same_way_and_no_token_reverses_it() -> None:
    env = {**NOTIFIER, **ANALYSIS, "DRIFTGUARD_REDACT_KEY": KEY}
    n, a = NotifierSettings.from_env(env), AnalysisSettings.from_env(env)
    value = "correct horse battery staple"
    masked_n, masked_a = Redactor(salt=n.redact_key).mask(value), Redactor(salt=a.redact_key).mask(value)
    assert masked_n == masked_a
    digest = re.fullmatch(r"\*\*\*\(sha256:([0-9a-f]{8})\)", masked_n)
    assert digest is not None
    # the offline dictionary attack of the issue: the key as main derived it from each token
    for token in (NOTIFIER["DRIFTGUARD_NOTIFIER_TOKEN"], ANALYSIS["DRIFTGUARD_ANALYSIS_TOKEN"]):
        derived = hashlib.sha256(b"driftguard-redact\0" + token.encode()).digest()
        guess = hmac.new(derived, dumps(value).encode(), hashlib.sha256).hexdigest()[:8]
        assert guess != digest.group(1)

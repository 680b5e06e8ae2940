"""DRIFTGUARD_ARGOCD_TOKEN or _TOKEN_FILE, one reading for every component (driftguard.env.secret)."""

from __future__ import annotations

from pathlib import Path

import pytest

import notifier.digest
from driftguard import readable
from driftguard.argocd import ArgoCDSettings
from driftguard.errors import ConfigError

URL = "https://argocd.example.com"


def test_the_token_from_a_mounted_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("argocd-token-value\n")
    settings = ArgoCDSettings.from_env(
        {"DRIFTGUARD_ARGOCD_URL": URL, "DRIFTGUARD_ARGOCD_TOKEN_FILE": str(token)}
    )
    assert settings.token == "argocd-token-value"
    with pytest.raises(
        ConfigError, match="DRIFTGUARD_ARGOCD_TOKEN: set it or DRIFTGUARD_ARGOCD_TOKEN_FILE"
    ) as both:
        ArgoCDSettings.from_env(
            {
                "DRIFTGUARD_ARGOCD_URL": URL,
                "DRIFTGUARD_ARGOCD_TOKEN": "x",
                "DRIFTGUARD_ARGOCD_TOKEN_FILE": str(token),
            }
        )
    assert "argocd-token-value" not in str(both.value)
    with pytest.raises(ConfigError, match="DRIFTGUARD_ARGOCD_TOKEN_FILE: cannot be read"):
        ArgoCDSettings.from_env(
            {"DRIFTGUARD_ARGOCD_URL": URL, "DRIFTGUARD_ARGOCD_TOKEN_FILE": str(tmp_path / "no")}
        )
    with pytest.raises(ConfigError, match="DRIFTGUARD_ARGOCD_TOKEN"):
        ArgoCDSettings.from_env({"DRIFTGUARD_ARGOCD_URL": URL})


def test_the_alerts_use_the_shared_readable_rules() -> None:
    """notifier/digest.py re-exports driftguard/readable.py's rules: one way to write a change."""
    assert notifier.digest.readable_path is readable.readable_path and notifier.digest.short is readable.short
    assert (
        readable.readable_path("/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu")
        == 'containers[0].resources.limits["nvidia.com/gpu"]'
    )

"""driftguard-analysis as the Deployment runs it: settings checked once, then gunicorn."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).parent / "driftguard-analysis")


def test_bad_settings_are_one_line_before_any_gunicorn() -> None:
    base = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_ANALYSIS_TOKEN": "analysis-token-0123456789",
        "DRIFTGUARD_REDACT_KEY": "redact-key-for-tests-0123456789abcdef",
    }
    argocd = {"DRIFTGUARD_ARGOCD_URL": "https://argocd.example.com", "DRIFTGUARD_ARGOCD_TOKEN": "t"}
    for env, setting in (
        ({**base, **argocd, "DRIFTGUARD_ANALYSIS_TOKEN": "short"}, "DRIFTGUARD_ANALYSIS_TOKEN"),
        (base, "DRIFTGUARD_ARGOCD_URL"),
        (
            {**base, "DRIFTGUARD_ARGOCD_URL": "ftp://argocd.example.com", "DRIFTGUARD_ARGOCD_TOKEN": "t"},
            "DRIFTGUARD_ARGOCD_URL",
        ),
    ):
        proc = subprocess.run([CLI], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 2, (env, proc.stderr)
        assert proc.stderr.startswith(f"driftguard-analysis: error: {setting}: "), proc.stderr
        assert "Traceback" not in proc.stderr

"""The configuration reference (docs/configuration.md) is checked against the code, so it cannot go stale."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("driftguard", "cmp_plugin", "notifier", "analysis_provider")


def variables_in_code() -> set[str]:
    found: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            found.update(re.findall(r"\b(DRIFTGUARD_[A-Z0-9_]+)\b", text))
            # ArgoCDSettings builds its names from a prefix: DRIFTGUARD_ARGOCD_{NAME}
            if (
                path == ROOT / "driftguard" / "argocd.py"
            ):  # names built from a prefix: DRIFTGUARD_ARGOCD_{NAME}
                found.update(f"DRIFTGUARD_ARGOCD_{n}" for n in re.findall(r'\("([A-Z_]+)", "[a-z_]+"', text))
    prefixes = {v for v in found if v.endswith("_")}
    return {v for v in found - prefixes if not v.endswith("*")} - {
        "DRIFTGUARD_NOTIFIER_",
        "DRIFTGUARD_ARGOCD_",
    }


def configuration_section() -> str:
    return (ROOT / "docs" / "configuration.md").read_text()


def test_every_variable_the_code_reads_is_documented() -> None:
    section = configuration_section()
    missing = sorted(
        v for v in variables_in_code() if v not in section and not v.startswith("DRIFTGUARD_CMP_*")
    )
    assert missing == [], f"add to docs/configuration.md: {missing}"


def test_every_documented_variable_exists() -> None:
    documented = set(re.findall(r"`(DRIFTGUARD_[A-Z0-9_]+)`", configuration_section()))
    code = variables_in_code()
    assert documented - code == set(), f"documented but not read by any code: {sorted(documented - code)}"

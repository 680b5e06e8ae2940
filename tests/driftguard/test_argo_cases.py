"""Argo CD v3.5.1's own test cases (tests/data/argo-cases, see SOURCES.md) hold for driftguard.

Each case is checked by scripts/argo_cases.py, the same runner `make corpus` uses over the full
corpus: where Argo says not modified, no alerting change; where Argo says modified, an alerting
change on the same path; the same ignored paths, matched rules and sync-window answers.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "argo-cases"


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("argo_cases", ROOT / "scripts" / "argo_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("argo_cases", module)
    spec.loader.exec_module(module)
    module.QUIET = True
    return module


RUNNER = _runner()
CASES: list[tuple[str, dict[str, Any]]] = [
    (area, case)
    for area, name in (
        ("diff", "diff_cases.json"),
        ("ignore", "ignore_cases.json"),
        ("windows", "windows_cases.json"),
    )
    for case in json.loads((DATA / name).read_text())
]


def test_every_area_is_there() -> None:
    counts = {area: sum(1 for a, _ in CASES if a == area) for area in ("diff", "ignore", "windows")}
    assert counts["diff"] >= 30 and counts["ignore"] >= 25 and counts["windows"] >= 72


@pytest.mark.parametrize(("area", "case"), CASES, ids=[f"{a}: {c['name']}" for a, c in CASES])
def test_argo_case_holds(area: str, case: dict[str, Any]) -> None:
    RUNNER.RESULTS.clear()
    RUNNER.RUNNERS[area](case)
    assert len(RUNNER.RESULTS) == 1
    label, ok, detail = RUNNER.RESULTS[0]
    assert ok, f"{label}: {detail}"

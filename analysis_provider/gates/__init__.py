"""Gates, one module each, registered here by the name in the URL (/v1/gates/<name>)."""

from __future__ import annotations

from analysis_provider.gates.base import FAIL, INCONCLUSIVE, PASS, Gate, GateContext, Verdict
from analysis_provider.gates.drift import DriftGate
from analysis_provider.gates.freeze import FreezeGate
from analysis_provider.gates.success_rate import SuccessRateGate
from analysis_provider.gates.sync import SyncGate

__all__ = ["FAIL", "GATES", "INCONCLUSIVE", "PASS", "Gate", "GateContext", "Verdict"]

GATES: dict[str, Gate] = {g.name: g for g in (DriftGate(), SyncGate(), SuccessRateGate(), FreezeGate())}

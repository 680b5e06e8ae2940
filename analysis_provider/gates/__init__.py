"""Gates, one module each, registered here by the name in the URL (/v1/gates/<name>).

Everything else is derived from this table: the routes, ``/openapi.json``, the ``gate`` label of
the metrics, ``/readyz``'s list, and what ``all`` accepts and runs. Adding a gate:
docs/development.md ("Add a gate").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis_provider.gates.base import FAIL, INCONCLUSIVE, PASS, Arg, Gate, GateContext, Verdict
from analysis_provider.gates.drift import DriftGate
from analysis_provider.gates.freeze import FreezeGate
from analysis_provider.gates.success_rate import SuccessRateGate
from analysis_provider.gates.sync import SyncGate

__all__ = [
    "ALL_ARGS",
    "FAIL",
    "GATES",
    "INCONCLUSIVE",
    "PASS",
    "Gate",
    "GateContext",
    "Verdict",
    "all_args",
    "all_summary",
    "in_all",
]

GATES: dict[str, Gate] = {g.name: g for g in (DriftGate(), SyncGate(), SuccessRateGate(), FreezeGate())}


def all_args(gates: Mapping[str, Gate]) -> dict[str, Arg]:
    """What ``/v1/gates/all`` accepts: every gate's ``all_args``."""
    return {name: arg for g in gates.values() for name, arg in g.all_args.items()}


def all_summary(gates: Mapping[str, Gate]) -> str:
    """``all``'s summary in ``/openapi.json``, naming the gates it runs only when asked."""
    asked = [g for g in gates.values() if g.all_when]
    when = "; ".join(f"{g.name} when {' or '.join(f'{a}=' for a in g.all_when)} is given" for g in asked)
    return (
        f"Every gate at once under one deadline ({when})."
        if when
        else "Every gate at once under one deadline."
    )


def in_all(args: Mapping[str, Any], gates: Mapping[str, Gate] = GATES) -> list[tuple[str, dict[str, Any]]]:
    """The gates ``all`` runs for its parsed ``args``, each with its own arguments, in answer order:
    the gates it always runs first, then those the arguments asked for (both in table order)."""
    always = [g for g in gates.values() if not g.all_when]
    asked = [g for g in gates.values() if g.all_when and any(args.get(a) for a in g.all_when)]
    return [(g.name, {k: args[k] for k in g.all_args}) for g in (*always, *asked)]


ALL_ARGS = all_args(GATES)

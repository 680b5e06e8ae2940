"""sync: pass only when the Application is Synced and Healthy and no operation runs or failed."""

from __future__ import annotations

from typing import Any

from analysis_provider.gates.base import APP_ARGS, FAIL, PASS, GateContext, Verdict

__all__ = ["SyncGate"]


class SyncGate:
    name = "sync"
    args = APP_ARGS

    def evaluate(self, args: dict[str, Any], ctx: GateContext) -> Verdict:
        app = ctx.application(args["app"], args["appNamespace"])
        status = app.get("status") or {}
        sync = str((status.get("sync") or {}).get("status") or "Unknown")
        health = str((status.get("health") or {}).get("status") or "Unknown")
        phase = str((status.get("operationState") or {}).get("phase") or "")
        observed = {"sync": sync, "health": health, "operationPhase": phase or None}
        reasons = []
        if sync != "Synced":
            reasons.append(f"sync status is {sync}")
        if health != "Healthy":
            reasons.append(f"health is {health}")
        if phase in ("Running", "Terminating"):
            reasons.append(f"an operation is {phase.lower()}")
        elif phase in ("Failed", "Error"):
            reasons.append(
                f"the last operation {phase.lower()}: {(status.get('operationState') or {}).get('message', '')}"[
                    :300
                ]
            )
        if reasons:
            return Verdict(self.name, FAIL, reasons, observed)
        return Verdict(self.name, PASS, ["Synced and Healthy, no operation running or failed"], observed)

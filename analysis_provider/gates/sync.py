"""sync: pass only when the Application is Synced and Healthy and no operation runs or failed."""

from __future__ import annotations

from typing import Any

from analysis_provider.gates.base import APP_ARGS, FAIL, PASS, GateContext, Verdict, a_string, an_object

__all__ = ["SyncGate"]


class SyncGate:
    name = "sync"
    summary = "Pass only when the Application is Synced and Healthy and no operation runs or failed."
    args = APP_ARGS
    all_args = APP_ARGS
    all_when: tuple[str, ...] = ()

    def evaluate(self, args: dict[str, Any], ctx: GateContext) -> Verdict:
        app = ctx.application(args["app"], args["appNamespace"])
        status = an_object(app.get("status"), "an Application status")
        operation = an_object(status.get("operationState"), "status.operationState")
        sync = a_string(an_object(status.get("sync"), "status.sync").get("status"), "status.sync.status")
        health = a_string(
            an_object(status.get("health"), "status.health").get("status"), "status.health.status"
        )
        sync, health = sync or "Unknown", health or "Unknown"
        phase = a_string(operation.get("phase"), "status.operationState.phase")
        observed = {"sync": sync, "health": health, "operationPhase": phase or None}
        reasons = []
        if sync != "Synced":
            reasons.append(f"sync status is {sync}")
        if health != "Healthy":
            reasons.append(f"health is {health}")
        if phase in ("Running", "Terminating"):
            reasons.append(f"an operation is {phase.lower()}")
        elif phase in ("Failed", "Error"):
            reasons.append(f"the last operation {phase.lower()}: {operation.get('message', '')}"[:300])
        if reasons:
            return Verdict(self.name, FAIL, reasons, observed)
        return Verdict(self.name, PASS, ["Synced and Healthy, no operation running or failed"], observed)

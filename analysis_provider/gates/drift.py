"""drift: fail while the Application has human, missing or prune-candidate changes."""

from __future__ import annotations

from typing import Any

from analysis_provider.gates.base import APP_ARGS, FAIL, PASS, GateContext, Verdict
from driftguard.identity import who as identity_who
from driftguard.report import build_report

__all__ = ["DriftGate"]

SHOWN = 10


class DriftGate:
    name = "drift"
    args = APP_ARGS

    def evaluate(self, args: dict[str, Any], ctx: GateContext) -> Verdict:
        app = ctx.application(args["app"], args["appNamespace"])
        items = ctx.cached(
            ("managed", args["app"], args["appNamespace"]),
            lambda: ctx.argocd.managed_resources(args["app"], args["appNamespace"]),
        )
        report = build_report(app, items, system_rules=ctx.system_rules, redactor=ctx.redactor, jq=ctx.jq)
        alerting = report.alerting
        counts = {cls: n for cls, n in report.to_json()["counts"].items() if n}
        observed = {
            "counts": counts,
            "suppressed": report.suppressed,
            "fingerprint": report.fingerprint() if alerting else "",
        }
        if not alerting:
            return Verdict(
                self.name, PASS, ["no human drift, missing or prune-candidate resources"], observed
            )
        reasons = []
        for c in alerting[:SHOWN]:
            if c.cls in ("missing", "prune-candidate"):
                reasons.append(f"{c.resource}: {c.cls}")
            else:
                # the alerts' actor line (driftguard/identity.py); the person once the gate has an identity store
                who = (
                    f" by {identity_who(manager=c.actor.manager, time=c.actor.time, user=c.actor.user, matched=c.actor.matched)}"
                    if c.actor
                    else ""
                )
                reasons.append(f"{c.resource}: {c.change.path} {_v(c.change.old)} -> {_v(c.change.new)}{who}")
        if len(alerting) > SHOWN:
            reasons.append(f"... and {len(alerting) - SHOWN} more")
        return Verdict(self.name, FAIL, reasons, observed)


def _v(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:59] + "…"

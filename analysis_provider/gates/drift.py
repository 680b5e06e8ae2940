"""drift: fail while the Application has human, missing or prune-candidate changes."""

from __future__ import annotations

from typing import Any

from analysis_provider.gates.base import APP_ARGS, FAIL, PASS, GateContext, Verdict, a_string
from driftguard import upstream
from driftguard.errors import InputError, UpstreamUnavailable
from driftguard.identity import who as identity_who
from driftguard.report import build_report

__all__ = ["DriftGate"]

SHOWN = 10


class DriftGate:
    name = "drift"
    args = APP_ARGS

    def evaluate(self, args: dict[str, Any], ctx: GateContext) -> Verdict:
        app = ctx.application(args["app"], args["appNamespace"])
        items = [
            _readable(i, n) for n, i in enumerate(ctx.managed_resources(args["app"], args["appNamespace"]))
        ]
        try:
            report = build_report(app, items, system_rules=ctx.system_rules, redactor=ctx.redactor, jq=ctx.jq)
        except InputError as exc:  # the app's own ignoreDifferences: Argo CD's data, not the request
            raise UpstreamUnavailable(
                f"Argo CD answered an Application whose rules cannot be read: {exc}"
            ) from exc
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


STATES = ("targetState", "liveState", "normalizedLiveState", "predictedLiveState")


def _readable(item: dict[str, Any], n: int) -> dict[str, Any]:
    """One managed-resources item with its states parsed, or UpstreamUnavailable.

    Argo CD sends each state as a JSON string of the object, ``"null"`` for a side that does not
    exist (v1alpha1ResourceDiff in its swagger.json). The drift engine reads an unreadable state as
    absent, which for both sides means "in sync": here that is refused, never passed.
    """
    out = dict(item)
    for name in STATES:
        raw = item.get(name)
        if raw is None:
            continue
        if not isinstance(raw, str):
            raise UpstreamUnavailable(
                f"Argo CD answered managed resources whose items[{n}].{name} is not a string"
            )
        if raw in ("", "null"):
            continue
        try:
            value = upstream.strict_json(raw.encode())
        except ValueError as exc:
            raise UpstreamUnavailable(
                f"Argo CD answered managed resources whose items[{n}].{name} is not JSON"
            ) from exc
        if not isinstance(value, dict):
            raise UpstreamUnavailable(
                f"Argo CD answered managed resources whose items[{n}].{name} is not an object"
            )
        out[name] = value
    for name in ("group", "kind", "namespace", "name"):
        a_string(item.get(name), f"managed resources items[{n}].{name}")
    return out


def _v(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:59] + "…"

"""drift: fail while the Application has human, missing or prune-candidate changes."""

from __future__ import annotations

from typing import Any

from analysis_provider.gates.base import APP_ARGS, FAIL, PASS, GateContext, Verdict, a_string
from analysis_provider.identities import Lookup, lookup
from driftguard import upstream
from driftguard.drift import Classified
from driftguard.errors import InputError, UpstreamUnavailable
from driftguard.identity import who as identity_who
from driftguard.report import build_report

__all__ = ["DriftGate"]

SHOWN = 10
NO_IDENTITY = "no identity available (the notifier's identity lookup failed)"


class DriftGate:
    name = "drift"
    summary = "Fail while the Application has human, missing or prune-candidate changes."
    args = APP_ARGS
    all_args = APP_ARGS
    all_when: tuple[str, ...] = ()

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
        shown = alerting[:SHOWN]
        # the person, when the notifier's identity store is asked (analysis_provider/identities.py):
        # an enrichment only, decided after the verdict and unable to change it
        found = (
            lookup(shown, items, ctx.identities, deadline=ctx.deadline)
            if ctx.identities is not None
            else None
        )
        if found is not None:
            observed["identity"] = found.observed()
        reasons = []
        for n, c in enumerate(shown):
            if c.cls in ("missing", "prune-candidate"):
                reasons.append(f"{c.resource}: {c.cls}")
            else:
                who = f" by {_actor(c, n, found)}" if c.actor else ""
                reasons.append(f"{c.resource}: {c.change.path} {_v(c.change.old)} -> {_v(c.change.new)}{who}")
        if len(alerting) > SHOWN:
            reasons.append(f"... and {len(alerting) - SHOWN} more")
        return Verdict(self.name, FAIL, reasons, observed)


def _actor(c: Classified, n: int, found: Lookup | None) -> str:
    """The alerts' actor line (driftguard/identity.py), with the person when the lookup found one."""
    assert c.actor is not None
    a = c.actor
    if found is None or n not in found.asked:
        return identity_who(manager=a.manager, time=a.time, user=a.user, matched=a.matched)
    if found.failed:
        return identity_who(manager=a.manager, time=a.time) + f"; {NO_IDENTITY}"
    user = found.users.get(n, "")
    return identity_who(manager=a.manager, time=a.time, user=user, matched=bool(user))


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

"""A reference model of what Argo CD's notifications controller sends, written from notifications-engine.

- pkg/triggers/service.go ``Run``: each condition of a trigger is evaluated with expr over the
  Application (``vars["app"]``); an error is logged and counts as not triggered; the condition's key
  is ``[i].<hash of when>``; ``oncePer`` is evaluated only when the condition holds.
- pkg/controller/controller.go ``processResourceWithAPI``: per trigger and destination, a condition
  that does not hold clears its "already notified" record (``SetAlreadyNotified(..., false)``); one
  that holds sends once, when the record was not there, and sets it.
- pkg/controller/state.go ``StateItemKey`` / ``SetAlreadyNotified``: the record key is
  ``trigger:conditionKey:service:recipient`` (``oncePer:`` in front when set); with ``oncePer`` the
  record is never cleared.
- pkg/services/webhook.go: the webhook client is go-retryablehttp with ``RetryMax`` 3 (defaults),
  each retry the same rendered body.

The conditions run in tests/manifests/expr.py (expr's semantics for what our triggers use), the
templates' bodies in tests/manifests/test_notifier_manifests.py ``go_template``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.manifests.expr import ExprError, evaluate
from tests.manifests.test_notifier_manifests import go_template

ROOT = Path(__file__).resolve().parents[2]
PATCH = ROOT / "manifests" / "components" / "argocd" / "argocd-notifications-cm-patch.yaml"
SUBSCRIPTIONS = (
    ROOT / "manifests" / "components" / "argocd-default-subscriptions" / "argocd-notifications-cm-patch.yaml"
)


def _shipped() -> dict[str, str]:
    """The component's keys plus the default subscriptions of the other component."""
    data: dict[str, str] = yaml.safe_load(PATCH.read_text())["data"]
    return {**data, **yaml.safe_load(SUBSCRIPTIONS.read_text())["data"]}


RETRY_MAX = 3


@dataclass
class Sent:
    trigger: str
    body: str
    """The rendered webhook body, exactly as each attempt posts it."""


@dataclass
class NotificationsEngine:
    """The shipped triggers, templates and default subscription, and the per-app notified state."""

    data: dict[str, str] = field(default_factory=_shipped)
    state: dict[str, int] = field(default_factory=dict)
    clock: int = 0

    def subscribed(self) -> list[tuple[str, str]]:
        """(trigger, recipient) of the default subscriptions (argocd-notifications-cm ``subscriptions``)."""
        return [
            (t, r)
            for sub in yaml.safe_load(self.data["subscriptions"])
            for t in sub["triggers"]
            for r in sub["recipients"]
        ]

    def process(self, app: dict[str, Any]) -> list[Sent]:
        """One reconcile of the Application: what is sent, in order."""
        self.clock += 1
        out: list[Sent] = []
        for trigger, recipient in self.subscribed():
            for i, cond in enumerate(yaml.safe_load(self.data[f"trigger.{trigger}"])):
                try:
                    triggered = evaluate(cond["when"], {"app": app}) is True
                except ExprError:
                    triggered = False  # logged by the controller, not triggered
                once = (
                    str(evaluate(cond["oncePer"], {"app": app})) if triggered and cond.get("oncePer") else ""
                )
                digest = hashlib.sha1(cond["when"].encode()).hexdigest()
                service, _, to = recipient.partition(":")
                key = f"{trigger}:[{i}].{digest}:{service}:{to}"
                key = f"{once}:{key}" if once else key
                if not triggered:
                    if not cond.get("oncePer"):
                        self.state.pop(key, None)
                    continue
                if key in self.state:
                    continue  # "already sent"
                self.state[key] = self.clock
                for template in cond["send"]:
                    hook = yaml.safe_load(self.data[f"template.{template}"])["webhook"][service]
                    out.append(Sent(trigger, go_template(hook["body"], app)))
        return out

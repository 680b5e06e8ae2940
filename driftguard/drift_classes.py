"""The classes a field change can get and the records the drift engine returns.

The decision that gives each class is ``driftguard/drift.py``'s table; the engine, the notifier,
the analysis provider and the CMP read these records (most of them through ``driftguard.drift``,
which re-exports every name here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from driftguard.diff import FieldChange
from driftguard.manifests import ResourceKey

__all__ = [
    "ADMISSION_DEFAULT",
    "ALERTING",
    "ARGOCD_MANAGERS",
    "CLASSES",
    "CONTROLLER",
    "DEFAULT_CONTROLLERS",
    "HUMAN",
    "IGNORED",
    "MISSING",
    "PENDING_SYNC",
    "PRUNE_CANDIDATE",
    "Actor",
    "Classified",
    "Policy",
    "ResourceDrift",
]

HUMAN = "human"
CONTROLLER = "controller"
ADMISSION_DEFAULT = "admission-default"
PENDING_SYNC = "pending-sync"
IGNORED = "ignored"
MISSING = "missing"
PRUNE_CANDIDATE = "prune-candidate"
CLASSES = (HUMAN, MISSING, PRUNE_CANDIDATE, PENDING_SYNC, CONTROLLER, ADMISSION_DEFAULT, IGNORED)
ALERTING = frozenset({HUMAN, MISSING, PRUNE_CANDIDATE})

DEFAULT_CONTROLLERS = frozenset(
    {
        "kube-controller-manager",  # HPA, Deployment controller, ...
        "kube-scheduler",
        "kubelet",
        "horizontal-pod-autoscaler",
        "vpa-recommender",
        "vpa-updater",
        "vpa-admission-controller",
        "keda-operator",
        "cluster-autoscaler",
        "karpenter",
    }
)
ARGOCD_MANAGERS = frozenset({"argocd-controller", "argocd-application-controller"})


@dataclass(frozen=True)
class Policy:
    """Which field managers are controllers and which are Argo CD itself."""

    controllers: frozenset[str] = DEFAULT_CONTROLLERS
    """Managers whose writes are legitimate runtime mutations (never alerted)."""
    argocd_managers: frozenset[str] = ARGOCD_MANAGERS
    """Argo CD's own field managers."""


@dataclass(frozen=True)
class Actor:
    """Who last wrote a field, from a managedFields entry."""

    manager: str
    operation: str = ""
    time: str | None = None
    user: str = ""
    """The person, when an identity record (audit or admission) matched this write (driftguard/identity.py)."""
    source: str = ""
    """Where ``user`` came from: ``audit`` or ``admission``."""
    matched: bool | None = None
    """None: no identity lookup ran; False: one ran and no record matched; True: ``user`` is set."""


@dataclass(frozen=True)
class Classified:
    """A field change with its class, the actor when known, and why it got that class."""

    resource: ResourceKey
    change: FieldChange
    cls: str
    actor: Actor | None = None
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "resource": {
                "group": self.resource.group,
                "kind": self.resource.kind,
                "namespace": self.resource.namespace,
                "name": self.resource.name,
            },
            "path": self.change.path,
            "op": self.change.op,
            "old": self.change.old,
            "new": self.change.new,
            "class": self.cls,
            "reason": self.reason,
        }
        if self.actor is not None:
            out["actor"] = {
                "manager": self.actor.manager,
                "operation": self.actor.operation,
                "time": self.actor.time,
            }
            if self.actor.matched is not None:  # an identity lookup ran (notifier/identity.py)
                out["actor"].update(
                    user=self.actor.user, source=self.actor.source, matched=self.actor.matched
                )
        return out


@dataclass
class ResourceDrift:
    """One resource's status (synced, modified, missing, prune-candidate) and its classified changes."""

    key: ResourceKey
    status: str
    changes: list[Classified] = field(default_factory=list)

    def by_class(self, cls: str) -> list[Classified]:
        return [c for c in self.changes if c.cls == cls]

    @property
    def alerting(self) -> list[Classified]:
        return [c for c in self.changes if c.cls in ALERTING]

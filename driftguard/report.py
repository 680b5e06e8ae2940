"""DriftReport: one Application's drift, ready for alerting and gating.

Built from the Application object and its managed-resources answer with the drift engine, using
the app's own ``spec.ignoreDifferences`` plus the argocd-cm rules.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from driftguard.cause import Cause, cause_from_application
from driftguard.codify_line import codify_args
from driftguard.drift import (
    ALERTING,
    CLASSES,
    HUMAN,
    MISSING,
    PRUNE_CANDIDATE,
    Classified,
    DriftEngine,
    Policy,
    ResourceDrift,
)
from driftguard.ignore import IgnoreRule, IgnoreRules, JqRunner, rules_from_application
from driftguard.redact import Redactor

__all__ = ["AppInfo", "DriftReport", "build_report", "severity_of"]

SEVERITIES = ("critical", "error", "warning", "info")


@dataclass(frozen=True)
class AppInfo:
    """What an alert says about the Application."""

    name: str
    namespace: str = "argocd"
    project: str = "default"
    cluster: str = ""
    destination_namespace: str = ""
    revision: str = ""
    sync_status: str = ""
    health_status: str = ""
    operation_phase: str = ""
    codify: str = ""
    """codify's PATH-form arguments for this Application, shell-quoted (driftguard/codify_line.py)."""

    @classmethod
    def from_application(cls, app: Mapping[str, Any]) -> AppInfo:
        meta = app.get("metadata") or {}
        spec = app.get("spec") or {}
        status = app.get("status") or {}
        dest = spec.get("destination") or {}
        sync = status.get("sync") or {}
        return cls(
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace") or "argocd"),
            project=str(spec.get("project") or "default"),
            cluster=str(dest.get("name") or dest.get("server") or ""),
            destination_namespace=str(dest.get("namespace") or ""),
            revision=str(sync.get("revision") or ""),
            sync_status=str(sync.get("status") or ""),
            health_status=str((status.get("health") or {}).get("status") or ""),
            operation_phase=str((status.get("operationState") or {}).get("phase") or ""),
            codify=shlex.join(codify_args(app)),
        )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class DriftReport:
    """Per-resource classified changes of one Application, and what was suppressed and why."""

    app: AppInfo
    resources: list[ResourceDrift] = field(default_factory=list)
    cause: Cause | None = None
    """Why the render is not there, when Argo CD says (a refused or failed render: driftguard.cause);
    with it, the prune set is what a render that never happened would remove."""

    @property
    def alerting(self) -> list[Classified]:
        return [c for r in self.resources for c in r.changes if c.cls in ALERTING]

    @property
    def suppressed(self) -> dict[str, int]:
        """Counts of the changes that do not alert, by class."""
        counts: dict[str, int] = {}
        for r in self.resources:
            for c in r.changes:
                if c.cls not in ALERTING:
                    counts[c.cls] = counts.get(c.cls, 0) + 1
        return counts

    @property
    def severity(self) -> str:
        return severity_of(self.alerting)

    def fingerprint(self) -> str:
        """Stable for the same drift: the app plus the set of alerted changes (values already masked)."""
        items = sorted(
            json.dumps(
                [str(c.resource), c.change.path, c.change.op, c.cls, c.change.new],
                sort_keys=True,
                default=str,
            )
            for c in self.alerting
        )
        return hashlib.sha256(json.dumps([self.app.key, items]).encode()).hexdigest()[:32]

    def to_json(self) -> dict[str, Any]:
        return {
            "app": self.app.__dict__,
            "severity": self.severity,
            "fingerprint": self.fingerprint(),
            "alerting": [c.to_json() for c in self.alerting],
            "suppressed": self.suppressed,
            "cause": self.cause.to_json() if self.cause else None,
            "counts": {
                cls: sum(1 for r in self.resources for c in r.changes if c.cls == cls) for cls in CLASSES
            },
        }


def severity_of(changes: Iterable[Classified]) -> str:
    """critical: a resource Git wants is gone; error: a person changed the cluster; warning: a prune candidate."""
    classes = {c.cls for c in changes}
    if MISSING in classes:
        return "critical"
    if HUMAN in classes:
        return "error"
    if PRUNE_CANDIDATE in classes:
        return "warning"
    return "info"


def build_report(
    app: Mapping[str, Any],
    items: Iterable[Mapping[str, Any]],
    *,
    system_rules: Iterable[IgnoreRule] = (),
    policy: Policy | None = None,
    redactor: Redactor | None = None,
    jq: JqRunner | None = None,
) -> DriftReport:
    """Run the drift engine over an Application's managed resources (``jq``: a long-lived runner to share)."""
    rules = IgnoreRules([*rules_from_application(app), *system_rules], _runner=jq)
    try:
        engine = DriftEngine(rules, policy=policy, redactor=redactor)
        drifts = [d for d in engine.managed_resources(items) if d.changes]
    finally:
        if jq is None:
            rules.close()
    return DriftReport(AppInfo.from_application(app), drifts, cause_from_application(app))

"""What the PR check reads and reports: environments, their changes, the options of one diff."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from cmp_plugin.prcheck.appset import Cluster
from cmp_plugin.prcheck.appset.applications import Expansion, GeneratedApp
from cmp_plugin.prcheck.appset.findings import (
    Finding,
)
from cmp_plugin.prcheck.fieldchanges import FieldLine
from driftguard.manifests import ResourceKey
from driftguard.redact import Redactor

__all__ = ["Change", "DiffOptions", "EnvDiff", "Environment", "Inventory", "LiveCheck", "Report"]


@dataclass(frozen=True)
class DiffOptions:
    """The diff's limits and ApplicationSet inputs (flags of ``driftguard-cmp diff``)."""

    repo_urls: tuple[str, ...] = ()
    clusters: tuple[Cluster, ...] | None = None
    policy: str = ""
    """The ApplicationSet controller's ``--policy``; empty: each ApplicationSet's own applicationsSync."""
    max_appset_shrink: float = 0.2
    allow_appset_shrink: tuple[str, ...] = ()
    max_apps: int = 1000
    timeout: float = 1800.0
    stray_patterns: tuple[str, ...] = ()
    """Beyond the sidecar's (DRIFTGUARD_CMP_STRAY_PATTERNS or the defaults)."""
    live: LiveCheck | None = None
    """``--live``: compares each environment with what runs in the cluster (cmp_plugin/prcheck/envlive.py)."""
    redactor: Redactor | None = None
    """Masks Secret values in field changes (``--live`` shares it); default: one with a key of this run."""


@dataclass(frozen=True)
class Environment:
    """One thing Argo CD renders: an Application (or a bare path) with its plugin parameters."""

    name: str
    path: str
    """Source path, relative to the repository root, as written."""
    namespace: str = ""
    parameters: tuple[tuple[str, Any], ...] = ()
    finalizers: tuple[str, ...] = ()
    appset: str = ""
    """The ApplicationSet that generates it; empty when written by hand."""
    origin: str = ""
    """What the generator made it from (``git directory clusters/...``)."""
    app_namespace: str = ""
    """The Application's own namespace (Argo CD's ``appNamespace``); empty: Argo CD's."""
    compare: str = ""
    """The Application's ``ignoreDifferences`` and ``syncPolicy.syncOptions`` as JSON (for ``--live``)."""


@dataclass
class Change:
    key: ResourceKey
    cause: str = ""
    fields: list[FieldLine] = field(default_factory=list)
    """What changes in the resource, field by field (changed and renamed resources)."""
    more_fields: int = 0
    """Field changes past the ones kept in ``fields``."""
    renamed_from: ResourceKey | None = None
    """A generated ConfigMap/Secret: the name it had at base (its hash suffix changed)."""


class LiveCheck(Protocol):
    """What ``--live`` does with one environment once both revisions are rendered."""

    def check(
        self, d: EnvDiff, base: dict[ResourceKey, dict[str, Any]], head: dict[ResourceKey, dict[str, Any]]
    ) -> None: ...


@dataclass
class EnvDiff:
    base: Environment | None
    head: Environment | None
    removed: list[Change] = field(default_factory=list)
    added: list[Change] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    renamed: list[Change] = field(default_factory=list)
    """Generated ConfigMaps/Secrets whose hash suffix changed: one change of their keys, not a removal."""
    kept: list[Change] = field(default_factory=list)
    """Resources of a deleted Application that stay in the cluster (no pruning finalizer, policy)."""
    definition: list[str] = field(default_factory=list)
    """How the Application itself changed (source path, parameters, namespace)."""
    deletion: str = ""
    """Why the Application disappears at head, when it does."""
    errors: dict[str, str] = field(default_factory=dict)
    """revision label (base/head) -> why it could not be rendered."""
    live: Any = None
    """With ``--live``: what merging does to the cluster as it is now (cmp_plugin/prcheck/envlive.py LiveDiff)."""
    unchanged: bool = False
    """Its render inputs are identical at both revisions (the same fingerprint): not rendered."""

    @property
    def env(self) -> Environment:
        env = self.head or self.base
        assert env is not None
        return env

    @property
    def name(self) -> str:
        return self.env.name

    @property
    def broken(self) -> bool:
        """Cannot be rendered at head, and this PR broke it (the same error at base was there before)."""
        return "head" in self.errors and self.errors.get("base") != self.errors["head"]


@dataclass
class Report:
    base_sha: str
    head_sha: str
    diffs: list[EnvDiff]
    findings: list[Finding] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)
    """base/head -> ApplicationSets that could not be expanded, and why."""
    live: bool = False
    """``--live`` was used: each environment's ``live`` says what it found."""


@dataclass
class Inventory:
    envs: dict[str, Environment] = field(default_factory=dict)
    appsets: dict[str, Expansion] = field(default_factory=dict)
    generated: dict[str, GeneratedApp] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    defined_at: dict[str, str] = field(default_factory=dict)
    """Where each hand-written Application is defined (``file:line``), to refuse a second definition."""

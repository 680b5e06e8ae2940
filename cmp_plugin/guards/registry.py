"""The guards, one module each, registered here in the order they run.

Adding one is a new module behind the ``Guard`` Protocol (base.py), one line below and its tests
(docs/development.md, "Add a guard").
"""

from __future__ import annotations

from cmp_plugin.guards.base import Guard
from cmp_plugin.guards.duplicates import DuplicatesGuard
from cmp_plugin.guards.empty import EmptyGuard
from cmp_plugin.guards.implicit_defaults import ImplicitDefaultsGuard
from cmp_plugin.guards.shrink import ShrinkGuard
from cmp_plugin.guards.stray_artifacts import StrayArtifactsGuard

__all__ = ["GUARDS"]

GUARDS: tuple[Guard, ...] = (
    StrayArtifactsGuard(),
    EmptyGuard(),
    DuplicatesGuard(),
    ImplicitDefaultsGuard(),
    ShrinkGuard(),  # last: it explains removals with what implicit-defaults found
)

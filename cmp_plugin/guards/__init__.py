"""Guards, one module each, registered here in the order they run."""

from __future__ import annotations

from cmp_plugin.guards.base import RENDER, SOURCE, Guard, GuardContext
from cmp_plugin.guards.duplicates import DuplicatesGuard
from cmp_plugin.guards.empty import EmptyGuard
from cmp_plugin.guards.implicit_defaults import ImplicitDefaultsGuard
from cmp_plugin.guards.shrink import ShrinkGuard
from cmp_plugin.guards.stray_artifacts import StrayArtifactsGuard

__all__ = ["GUARDS", "RENDER", "SOURCE", "Guard", "GuardContext"]

GUARDS: tuple[Guard, ...] = (
    StrayArtifactsGuard(),
    EmptyGuard(),
    DuplicatesGuard(),
    ImplicitDefaultsGuard(),
    ShrinkGuard(),  # last: it explains removals with what implicit-defaults found
)

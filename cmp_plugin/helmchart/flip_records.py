"""The flip proof's records and limits: a flipped key, a resource it moves, what a proof found."""

from __future__ import annotations

from typing import Any, NamedTuple

from driftguard.manifests import ResourceKey

GONE = "gone"
"""Prove that a flip removes resources of the base render (implicit-defaults)."""
BACK = "back"
"""Prove that a flip brings back resources missing from the base render (the cause of a removal)."""

PARALLEL = 2
"""helm processes a proof runs at once (the sidecar's CPU is shared with the other renders)."""
MAX_RENDERS = 48
"""Renders one proof may run; keys left unproven past it are reported as such."""
MAX_CHART_BYTES = 64 << 20
_VERSION = "driftguard-flip-proof-1"


class Flip(NamedTuple):
    """One values key and the value a render sets it to (None: removed, as helm's null removes)."""

    key: str
    value: Any
    templates: tuple[str, ...] = ()
    """Template paths (relative to the top chart; a directory covers what is under it) that the
    key's gates decide: the scan's hint for crediting a changed resource to one key of a render."""


class Resource(NamedTuple):
    """A rendered document: its identity, template (relative to the top chart) and whether Argo CD keeps it."""

    key: ResourceKey
    template: str
    kept: bool


class Proof(NamedTuple):
    changed: dict[str, tuple[Resource, ...]]
    """Flip key -> the resources its flip removed (GONE) or brought back (BACK)."""
    failed: dict[str, str]
    """Flip key -> why no render could prove it (helm's error, the render budget)."""
    renders: int
    """helm renders run for this proof (0 when it came from the cache)."""
    pending: tuple[str, ...] = ()
    """Flip keys not settled within the time the caller gave (``finish(budget=...)``): the next
    proof of the same content goes on from here (the cache holds what is settled)."""
    groups: tuple[tuple[str, ...], ...] = ()
    """The pending keys as the groups still to render: a resumed proof keeps the splits made so far."""

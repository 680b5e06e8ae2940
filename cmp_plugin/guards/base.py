"""The one small interface every guard implements."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from cmp_plugin.renderers.base import Rendered, RenderJob
from cmp_plugin.scan import Doc
from driftguard.manifests import ResourceKey

__all__ = ["RENDER", "SOURCE", "Guard", "GuardContext"]

SOURCE = "source"  # runs before rendering, on the files
RENDER = "render"  # runs on the rendered resources


class GuardContext:
    """What a guard may look at. ``docs[i]`` has identity ``keys[i]``."""

    def __init__(self, job: RenderJob, *, renderer: str = "", hot: bool = False) -> None:
        self.job = job
        self.hot = hot
        """Argo CD waits for this render (``generate``): work that can wait for the next render waits."""
        self.renderer = renderer
        """The renderer's name, known before it runs."""
        self.rendered: Rendered | None = None
        self.docs: list[Doc] = []
        """Every resource of the render, Lists flattened and null lists dropped as Argo CD does."""
        self.keys: list[ResourceKey] = []
        """``docs[i]``'s key as Argo CD keys it before the hook split (destination namespace filled in)."""
        self.kept: list[ResourceKey] = []
        """What Argo CD keeps of the render (cmp_plugin/target.py): hooks, ignored and replaced out."""
        self.left_out: list[tuple[int, str]] = []
        """(index in docs, why) of what the render prints but Argo CD does not keep."""
        self.notes: dict[str, object] = {}
        """What one guard learned that a later one may use (implicit-defaults -> shrink)."""
        self.cleanups: list[Callable[[], None]] = []
        """Called once the render is over, refused or not: stop what a guard started in ``begin``."""


class Guard(Protocol):
    """Refuses by raising GuardRefusal; returns warnings (printed on stderr) otherwise."""

    name: str
    stage: str

    def begin(self, ctx: GuardContext) -> None:
        """Called as soon as the renderer has started: start slow lookups here."""
        ...

    def check(self, ctx: GuardContext) -> list[str]: ...


class GuardBase:
    """Defaults for the optional parts of Guard."""

    name = ""
    stage = RENDER

    def begin(self, ctx: GuardContext) -> None:
        return None

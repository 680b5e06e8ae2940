"""empty: a render Argo CD keeps nothing of is refused (it would prune everything it manages).

Hooks and ignored resources do not count (cmp_plugin/target.py): Argo CD runs or skips them, and
still prunes every live resource the render no longer keeps.
"""

from __future__ import annotations

from cmp_plugin.guards.base import RENDER, GuardBase, GuardContext
from driftguard.errors import GuardRefusal

__all__ = ["EmptyGuard"]


class EmptyGuard(GuardBase):
    name = "empty"
    stage = RENDER

    def check(self, ctx: GuardContext) -> list[str]:
        if ctx.kept:
            return []
        if ctx.job.env.param("allow-empty"):
            return [
                "driftguard: warning: the render is empty and allow-empty is true: Argo CD may prune everything"
            ]
        renderer = ctx.rendered.renderer if ctx.rendered else "the renderer"
        raise GuardRefusal(
            self.name,
            f"{renderer} rendered 0 resources"
            if not ctx.docs
            else f"{renderer} rendered {len(ctx.docs)} resource(s), none of which Argo CD keeps (hooks or ignored)",
            details=[
                "Argo CD treats an empty render as success and, with prune on, deletes what the app manages."
            ],
            fix="check the values and the source path; if the app really should be empty, set the plugin parameter allow-empty: 'true'",
        )

"""duplicates: the same resource (group, kind, namespace, name) rendered twice is refused."""

from __future__ import annotations

from cmp_plugin.guards.base import RENDER, GuardBase, GuardContext
from driftguard.errors import GuardRefusal
from driftguard.manifests import ResourceKey

__all__ = ["DuplicatesGuard"]


class DuplicatesGuard(GuardBase):
    name = "duplicates"
    stage = RENDER

    def check(self, ctx: GuardContext) -> list[str]:
        first: dict[ResourceKey, int] = {}
        clashes: list[str] = []
        for i, key in enumerate(ctx.keys):
            if key in first:
                clashes.append(f"{key}: {ctx.docs[first[key]].where} and {ctx.docs[i].where}")
            else:
                first[key] = i
        if clashes:
            raise GuardRefusal(
                self.name,
                f"{len(clashes)} resource(s) rendered more than once",
                details=clashes,
                fix="remove or rename one of each pair; Argo CD would apply only one of them",
            )
        return []

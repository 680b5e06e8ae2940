"""stray-artifacts: committed render output under the app path is refused.

The incident: a rebase reverted ``.gitignore``, stale ``helm-rendered/`` and ``kustomize-build/``
output was committed, and a directory generator read it as truth.
"""

from __future__ import annotations

import fnmatch
import os

from cmp_plugin.guards.base import SOURCE, GuardBase, GuardContext
from driftguard.errors import GuardRefusal

__all__ = ["StrayArtifactsGuard"]


class StrayArtifactsGuard(GuardBase):
    name = "stray-artifacts"
    stage = SOURCE

    def check(self, ctx: GuardContext) -> list[str]:
        job = ctx.job
        patterns = tuple(job.settings.stray_patterns) + tuple(job.env.param("stray-patterns"))
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(job.app_dir):
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            rel_dir = os.path.relpath(dirpath, job.app_dir)
            for name in [*dirnames, *sorted(filenames)]:
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(rel, p) for p in patterns):
                    found.append(rel + ("/" if name in dirnames else ""))
            dirnames[:] = [
                d for d in dirnames if (f"{rel_dir}/{d}" if rel_dir != "." else d) + "/" not in found
            ]
        if found:
            raise GuardRefusal(
                self.name,
                f"{len(found)} path(s) look like committed render output",
                details=found,
                fix="delete them from Git and restore the .gitignore entries; render output must never be committed",
            )
        return []

"""What an ApplicationSet change does between base and head: why an Application goes, shrink, strays.

- An Application the ApplicationSet generated at base and not at head is deleted by the
  controller, and with ``resources-finalizer.argocd.argoproj.io`` (added by default) everything it
  manages is pruned, unless the policy keeps it (create-only / create-update never delete;
  utils/policy.go ``DefaultPolicy``: the controller's ``--policy`` wins unless the ApplicationSet
  sets ``applicationsSync`` and no ``--policy`` was given, which is when Argo CD enables override).
- Shrink: an ApplicationSet that generates zero Applications at head where it generated some at
  base, or loses more than ``--max-appset-shrink`` of them, is a finding of its own.
- Strays: a new Application generated from a path matching the stray-artifact patterns.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from cmp_plugin.prcheck.appset.applications import Expansion, GeneratedApp

__all__ = ["Finding", "disappearance_reason", "effective_policy", "shrink_findings", "stray_findings"]

KEEPING_POLICIES = ("create-only", "create-update")


@dataclass(frozen=True)
class Finding:
    kind: str
    """shrink or stray."""
    appset: str
    message: str
    allowed: bool = False
    """True when ``--allow-appset-shrink`` names this ApplicationSet."""


def effective_policy(expansion: Expansion, controller_policy: str) -> str:
    if controller_policy:
        return controller_policy
    return expansion.applications_sync or "sync"


def disappearance_reason(app: GeneratedApp, head: Expansion | None, head_tree: Path) -> str:
    """Why ``app`` (generated at base) is not generated at head, in the generator's words."""
    if head is None:
        return "the ApplicationSet is gone at head (the controller deletes the Applications it owns)"
    keys = {o.key for o in app.origins}
    for dropped in head.dropped:
        if dropped.origins and {o.key for o in dropped.origins} <= keys:
            return f"{dropped.origins[-1].what}: {dropped.reason}"
    same = [a for a in head.apps if {o.key for o in a.origins} == keys]
    if same:
        return f"{app.origins[-1].what} now generates {same[0].name} (the name template changed)"
    present = head.origin_keys
    for origin in app.origins:
        if origin.key in present:
            continue
        if origin.generator == "git":
            kind = "directory" if origin.key.startswith("dir:") else "file"
            exists = (head_tree / origin.path).exists()
            return f"{origin.what}: " + (
                f"the {kind} no longer matches the generator's paths" if exists else f"the {kind} was removed"
            )
        if origin.generator == "list":
            return f"{origin.what}: the list element was removed or changed"
        if origin.generator == "clusters":
            return f"{origin.what}: the cluster is no longer listed or no longer matches the generator's selector"
    return "the generator no longer produces this parameter set"


def shrink_findings(
    name: str, base: Expansion | None, head: Expansion | None, *, max_shrink: float, allowed: list[str]
) -> list[Finding]:
    if base is None or not base.apps:
        return []
    before = {a.name for a in base.apps}
    after = {a.name for a in head.apps} if head is not None else set()
    gone = before - after
    ok = any(fnmatch.fnmatchcase(name, p) for p in allowed)
    if not after:
        why = "is gone at head" if head is None else "would generate zero Applications at head"
        return [
            Finding("shrink", name, f"ApplicationSet {name} {why} (it generates {len(before)} at base)", ok)
        ]
    if gone and len(gone) / len(before) > max_shrink:
        return [
            Finding(
                "shrink",
                name,
                f"ApplicationSet {name} would stop generating {len(gone)} of its {len(before)} Applications "
                f"({len(gone) / len(before):.0%} > --max-appset-shrink {max_shrink:.0%})",
                ok,
            )
        ]
    return []


def stray_findings(
    name: str, base: Expansion | None, head: Expansion, patterns: tuple[str, ...]
) -> list[Finding]:
    before = {a.name for a in base.apps} if base is not None else set()
    out = []
    for app in head.apps:
        if app.name in before:
            continue
        source = (app.app.get("spec") or {}).get("source") or {}
        paths = [o.path for o in app.origins if o.path]
        if isinstance(source, dict) and isinstance(source.get("path"), str):
            paths.append(source["path"].strip("/"))  # a files or list generator can point there too
        for path in paths:
            hit = _stray_segment(path, patterns)
            if hit:
                out.append(
                    Finding(
                        "stray",
                        name,
                        f"ApplicationSet {name} {app.generator} would create Application {app.name} from "
                        f"{path}, which looks like committed render output ({hit})",
                    )
                )
                break
    return out


def _stray_segment(path: str, patterns: tuple[str, ...]) -> str:
    parts = path.split("/")
    for i, seg in enumerate(parts):
        sub = "/".join(parts[: i + 1])
        for p in patterns:
            if fnmatch.fnmatchcase(seg, p) or fnmatch.fnmatchcase(sub, p):
                return f"`{seg}` matches stray pattern `{p}`"
    return ""

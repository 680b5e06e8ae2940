"""Why a resource disappeared between two renders, when a gating values key explains it."""

from __future__ import annotations

import json
from typing import Any

from cmp_plugin.chart_values import truthy
from cmp_plugin.guards.implicit_defaults import Finding
from driftguard.manifests import ResourceKey

__all__ = ["cause_of"]


def cause_of(key: ResourceKey, source: str, before: list[Finding], after: list[Finding]) -> str:
    """The gate (``if .Values.x``) that hides ``key`` at head and did not at base, in words."""
    was = {(f.gate.key, f.gate.file): f for f in before}
    for f in after:
        old = was.get((f.gate.key, f.gate.file))
        if not _hides(f) or (old is not None and _hides(old)):
            continue
        kinds = {r.split(" ", 1)[0] for r in f.gate.resources}
        rel = source.split("/", 1)[1] if "/" in source else source
        in_file = bool(source) and any(rel == s or rel.startswith(s + "/") for s in f.gate.sources)
        if not in_file or not (key.kind in kinds or "?" in kinds):
            continue
        where = f"{f.where()}: {f.quoted()}"  # the gate exactly as the template writes it
        if not f.explicit and old is not None and old.default != f.default:
            return f"the chart default of `{f.gate.key}` changed from {_v(old.default)} to {_v(f.default)} and this environment does not set it ({where})"
        if f.explicit and old is not None and old.value != f.value:
            return f"this environment's values changed `{f.gate.key}` from {_v(old.value)} to {_v(f.value)} ({where})"
        origin = "chart default" if not f.explicit else "value"
        return f"`{f.gate.key}` ({origin} {_v(f.value)}) now hides it ({where})"
    return ""


def _hides(f: Finding) -> bool:
    """The gate hides its resources; a condition the scanner cannot decide (``renders`` None, as in a
    subchart's ``if .Values.enabled``) is read as a plain truth test of the key's value."""
    return f.renders is False or (
        f.renders is None and f.gate.condition.split()[:1] == ["if"] and not truthy(f.value)
    )


def _v(value: Any) -> str:
    return "unset" if value is None else json.dumps(value)

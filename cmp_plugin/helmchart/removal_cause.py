"""Which values key decided that a resource is not rendered: one proof for the shrink guard and the PR diff.

A resource Argo CD manages (the shrink guard's baseline) or rendered at the PR's base (the PR
diff) is missing from this render. The template scan proposes the keys that could hide it; a helm
render of this same environment with those keys flipped (cmp_plugin.helmchart.flip_proof, direction BACK)
shows which one brings it back, and only that key is named. When none does, the cause is not
known and is said so (``UNKNOWN``): naming the first gate of the same kind blamed the wrong key on
real charts.

- shrink guard (:func:`hidden_flips`): every gate whose condition is false here, flipped towards
  rendering (false -> true, an unset key -> true, a truthy value under ``not`` -> off);
- PR diff (:func:`changed_flips`): every gating key whose value differs between base and head,
  set back to its base value.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NamedTuple

from cmp_plugin.helmchart import chart_values as cv
from cmp_plugin.helmchart.flip_proof import BACK, Flip, Resource, prove
from cmp_plugin.helmchart.implicit import DISABLED, Finding, Prepared, eval_view, flip_of
from cmp_plugin.helmchart.switch_eval import evaluate

if TYPE_CHECKING:
    from cmp_plugin.renderers.base import RenderJob
    from driftguard.manifests import ResourceKey

__all__ = ["UNKNOWN", "Cause", "cause_of", "causes", "changed_flips", "hidden_flips"]

UNKNOWN = "which values key decided it is not known (no flip of a gating key brings it back)"
CHART_DEFAULT, VALUE = "chart-default", "value"


class Cause(NamedTuple):
    """The key a render proved decides a missing resource."""

    key: str
    origin: str
    """CHART_DEFAULT or VALUE (this environment sets it): driftguard.cause's origins."""
    where: str
    """template:line of the key's first gate."""
    gate: str
    """That gate as written."""
    before: Any = None
    """PR diff: the key's value at base (what the proof render set it back to)."""
    after: Any = None
    """PR diff: its value at head."""

    def hidden(self) -> str:
        """The shrink guard's words, read back by driftguard.cause and the notifier."""
        origin = "the chart default" if self.origin == CHART_DEFAULT else "this environment's value"
        return f"hidden by {origin} of {self.key} ({self.where})"

    def changed(self) -> str:
        """The PR diff's words: what changed between the two revisions."""
        where = f"{self.where}: {self.gate}"
        if self.origin == CHART_DEFAULT:
            return (
                f"the chart default of `{self.key}` changed from {_v(self.before)} to {_v(self.after)} "
                f"and this environment does not set it ({where})"
            )
        return f"this environment's values changed `{self.key}` from {_v(self.before)} to {_v(self.after)} ({where})"


def _v(value: Any) -> str:
    return "unset" if value is None else json.dumps(value, default=str)[:80]


def _on(value: Any) -> tuple[bool, Any]:
    """The value that turns a gate that is off now on: true for false or unset, off for a truthy value."""
    if value is None or value is False:
        return True, True
    if cv.truthy(value):
        return flip_of(value)
    return False, None  # "", 0, [], {}: no value to guess


def hidden_flips(prep: Prepared, switches: list[Finding]) -> list[tuple[Flip, Finding]]:
    """The shrink guard's candidates: gates whose condition is false here, each flipped to render."""
    view = eval_view(prep)
    out: dict[str, tuple[Flip, Finding]] = {}
    for f in switches:
        g = f.gate
        if f.verdict == DISABLED or g.key in out:
            continue
        if evaluate(g, view, lookup=cv.lookup) is True:
            continue  # on already: flipping it cannot bring anything back
        ok, value = _on(cv.lookup(view, g.key)[1])
        if ok:
            hint = tuple(dict.fromkeys(s for h in switches if h.gate.key == g.key for s in h.gate.sources))
            out[g.key] = (Flip(g.key, value, hint), f)
    return list(out.values())


def changed_flips(base: Prepared, head: Prepared, switches: list[Finding]) -> list[tuple[Flip, Finding, Any]]:
    """The PR diff's candidates: gating keys whose value differs at head, set back to base's value."""
    view_b, view_h = eval_view(base), eval_view(head)
    out: dict[str, tuple[Flip, Finding, Any]] = {}
    for f in switches:
        key = f.gate.key
        if key in out:
            continue
        found_b, was = cv.lookup(view_b, key)
        found_h, now = cv.lookup(view_h, key)
        if (found_b, was) == (found_h, now):
            continue
        hint = tuple(dict.fromkeys(s for h in switches if h.gate.key == key for s in h.gate.sources))
        out[key] = (Flip(key, was if found_b else None, hint), f, now if found_h else None)
    return list(out.values())


def causes(
    job: RenderJob,
    missing: list[ResourceKey],
    candidates: list[tuple[Flip, Finding]],
    base: dict[ResourceKey, Resource],
) -> dict[ResourceKey, tuple[Flip, Finding]]:
    """For each missing resource, the candidate whose flip alone brings it back in a render of ``job``."""
    if not missing or not candidates:
        return {}
    proof = prove(job, [c[0] for c in candidates], base=base, want=BACK, targets=missing)
    by_key = {c[0].key: c for c in candidates}
    out: dict[ResourceKey, tuple[Flip, Finding]] = {}
    for c in candidates:  # the scan's order: the first gate that proves it names it
        for r in proof.changed.get(c[0].key, ()):
            out.setdefault(r.key, by_key[c[0].key])
    return out


def cause_of(flip: Flip, f: Finding, *, before: Any = None, after: Any = None) -> Cause:
    """The Cause for a proven candidate (its first gate's place and words)."""
    origin = VALUE if f.explicit else CHART_DEFAULT
    return Cause(flip.key, origin, f.where(), f.quoted(), before, after)

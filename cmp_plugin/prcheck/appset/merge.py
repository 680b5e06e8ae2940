"""The merge generator (applicationset/generators/merge.go): the first child's sets, overridden by key.

Each later child's parameter set whose ``mergeKeys`` values equal a base set's overrides that
set's parameters; later sets that match no base set are dropped, as in Argo CD.
"""

from __future__ import annotations

from typing import Any

from cmp_plugin.prcheck.appset.base import Context, Generated, Nested
from cmp_plugin.prcheck.appset.matrix import deep_merge

__all__ = ["MergeGenerator"]


class MergeGenerator:
    name = "merge"
    takes_values = False

    def generate(self, spec: dict[str, Any], ctx: Context, *, nested: Nested) -> list[Generated]:
        children = spec.get("generators") or []
        keys = [str(k) for k in spec.get("mergeKeys") or []]
        if not isinstance(children, list) or len(children) < 2:
            raise ctx.fail("a merge generator needs at least two child generators")
        if not keys:
            raise ctx.fail("a merge generator needs mergeKeys")
        base = nested(children[0])
        index: dict[tuple[str, ...], Generated] = {}
        for g in base:
            k = _key(g, keys)
            if k in index:
                raise ctx.fail(f"merge: the base generator yields duplicate mergeKeys values {list(k)}")
            index[k] = g
        for child in children[1:]:
            seen: set[tuple[str, ...]] = set()
            for g in nested(child):
                k = _key(g, keys)
                if k in seen:
                    raise ctx.fail(f"merge: a child generator yields duplicate mergeKeys values {list(k)}")
                seen.add(k)
                if k in index:
                    old = index[k]
                    merged = (
                        deep_merge(old.params, g.params) if ctx.go_template else {**old.params, **g.params}
                    )
                    index[k] = Generated(merged, old.origins + g.origins)
        return [index[_key(g, keys)] for g in base]


def _key(g: Generated, keys: list[str]) -> tuple[str, ...]:
    return tuple(str(g.params.get(k, "")) for k in keys)

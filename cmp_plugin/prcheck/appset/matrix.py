"""The matrix generator (applicationset/generators/matrix.go): every pair of two children's sets.

The second child is interpolated with each parameter set of the first (so a git generator can
read a path the first one names), and each pair's parameters are combined; in fasttemplate mode
a key both give with different values is an error, as in Argo CD's ``CombineStringMaps``.
"""

from __future__ import annotations

from typing import Any

from cmp_plugin.prcheck.appset import template
from cmp_plugin.prcheck.appset.base import Context, Generated, Nested

__all__ = ["MatrixGenerator"]


class MatrixGenerator:
    name = "matrix"
    takes_values = False

    def generate(self, spec: dict[str, Any], ctx: Context, *, nested: Nested) -> list[Generated]:
        children = spec.get("generators") or []
        if not isinstance(children, list) or len(children) != 2:
            raise ctx.fail("a matrix generator needs exactly two child generators")
        out = []
        firsts = nested(children[0])
        specs = template.render_each(children[1], [f.params for f in firsts], ctx)
        for first, second_spec in zip(firsts, specs, strict=True):
            for second in nested(second_spec):
                if ctx.go_template:  # mergo: the second's, overridden by the first's
                    params = deep_merge(second.params, first.params)
                else:
                    params = dict(first.params)
                    for key, value in second.params.items():
                        if key in params and params[key] != value:
                            raise ctx.fail(f"matrix: found duplicate key {key} with different value")
                        params[key] = value
                out.append(Generated(params, first.origins + second.origins))
                ctx.check_sets(len(out), "matrix")
        return out


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """mergo.Merge WithOverride: maps merged key by key, anything else replaced."""
    out = dict(base)
    for k, v in override.items():
        out[k] = deep_merge(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out

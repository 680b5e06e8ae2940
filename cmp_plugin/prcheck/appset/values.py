"""``values`` and ``selector`` on generators, applied the way Argo CD applies them.

values (applicationset/generators/value_interpolation.go): each value is rendered with the
generator's own parameters and added as ``values.<key>``. selector
(generator_spec_processor.go ``Transform``): a Kubernetes label selector matched against the
*flattened* parameters; a parameter set that does not match is dropped.
"""

from __future__ import annotations

from typing import Any

from cmp_plugin.prcheck.appset import template
from cmp_plugin.prcheck.appset.base import Context, Generated, Params
from cmp_plugin.prcheck.appset.gofmt import flatten, format_v

__all__ = ["add_values", "apply_values", "selector_matches"]


def add_values(params: Params, values: Any, ctx: Context) -> Params:
    if values in (None, {}):
        return params
    if not isinstance(values, dict):
        raise ctx.fail("generator `values` must be a map of strings")
    out = dict(params)
    for key, value in values.items():
        out[f"values.{key}"] = template.replace(str(value), params)
    return out


def apply_values(sets: list[Generated], values: Any, ctx: Context) -> list[Generated]:
    """``values`` on every parameter set; in Go template mode as one ``values`` map, rendered by helm."""
    if values in (None, {}):
        return sets
    if not isinstance(values, dict):
        raise ctx.fail("generator `values` must be a map of strings")
    if ctx.go is None:
        return [Generated(add_values(g.params, values, ctx), g.origins) for g in sets]
    keys = list(values)
    rendered = ctx.go.render_many([(str(values[k]), g.params) for g in sets for k in keys])
    out = []
    for i, g in enumerate(sets):
        row = dict(zip(keys, rendered[i * len(keys) : (i + 1) * len(keys)], strict=True))
        out.append(Generated({**g.params, "values": row}, g.origins))
    return out


def selector_matches(selector: Any, params: Params, ctx: Context) -> bool:
    """A label selector (matchLabels, matchExpressions) over the flattened parameters."""
    if not selector:
        return True
    if not isinstance(selector, dict):
        raise ctx.fail("generator `selector` must be a label selector")
    labels = {k: format_v(v) for k, v in flatten(params).items()}
    for key, want in (selector.get("matchLabels") or {}).items():
        if labels.get(str(key)) != str(want):
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op = str(expr.get("key", "")), str(expr.get("operator", ""))
        vals = [str(v) for v in expr.get("values") or []]
        if op == "In" and labels.get(key) not in vals:
            return False
        if op == "NotIn" and key in labels and labels[key] in vals:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ctx.fail(f"selector operator {op!r} is not a label selector operator")
    return True


def describe_selector(selector: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        parts.append(f"{expr.get('key')} {expr.get('operator')} {expr.get('values') or ''}".strip())
    return ", ".join(parts)

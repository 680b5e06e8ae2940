"""The list generator: one parameter set per element (applicationset/generators/list.go).

In fasttemplate mode every element value must be a string, and ``values: {k: v}`` becomes
``values.k``; ``elementsYaml`` elements are appended as they are.
"""

from __future__ import annotations

import json
from typing import Any

from cmp_plugin.prcheck.appset.base import Context, Generated, Nested, Origin
from driftguard.manifests import safe_load

__all__ = ["ListGenerator"]


class ListGenerator:
    name = "list"
    takes_values = False

    def generate(
        self, spec: dict[str, Any], ctx: Context, *, nested: Nested | None = None
    ) -> list[Generated]:
        elements = spec.get("elements") or []
        if not isinstance(elements, list):
            raise ctx.fail("list.elements must be a list")
        out = []
        for element in elements:
            if not isinstance(element, dict):
                raise ctx.fail("every list element must be a map")
            if ctx.go_template:
                out.append(Generated(dict(element), (_origin(element),)))
                continue
            params: dict[str, Any] = {}
            for key, value in element.items():
                if key == "values" and isinstance(value, dict):
                    for k, v in value.items():
                        if not isinstance(v, str):
                            raise ctx.fail(
                                f"list element value values.{k} is not a string (fasttemplate mode)"
                            )
                        params[f"values.{k}"] = v
                elif isinstance(value, str):
                    params[str(key)] = value
                else:
                    raise ctx.fail(f"list element key {key} is not a string (fasttemplate mode)")
            out.append(Generated(params, (_origin(element),)))
        if spec.get("elementsYaml"):
            extra = safe_load(str(spec["elementsYaml"]))
            if not isinstance(extra, list) or not all(isinstance(e, dict) for e in extra):
                raise ctx.fail("list.elementsYaml must be a YAML list of maps")
            out += [Generated(dict(e), (_origin(e),)) for e in extra]
        return out


def _origin(element: dict[str, Any]) -> Origin:
    key = json.dumps(element, sort_keys=True, default=str)
    return Origin("list", key, f"list element {key}")

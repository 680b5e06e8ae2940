"""One generator entry of ``spec.generators[]``: dispatch to its kind, then ``selector``.

Mirrors generator_spec_processor.go ``Transform``: exactly one generator key per entry (Argo CD:
"contains unrecognized generators"), the generator's own ``template`` merged over the
ApplicationSet's, and the selector matched against the flattened parameters.
"""

from __future__ import annotations

from typing import Any

from cmp_plugin.prcheck.appset.base import Context, Dropped, Generated
from cmp_plugin.prcheck.appset.generators import GENERATORS
from cmp_plugin.prcheck.appset.values import apply_values, describe_selector, selector_matches

__all__ = ["UNSUPPORTED", "generator_key", "transform"]

UNSUPPORTED = ("scmProvider", "pullRequest", "clusterDecisionResource", "plugin")
"""Argo CD's generators driftguard does not expand (a registered generator of the name wins)."""


def generator_key(entry: Any, ctx: Context) -> str:
    if not isinstance(entry, dict):
        raise ctx.fail("every entry of spec.generators must be a map")
    keys = [k for k in entry if k not in ("selector", "template", "values")]
    if len(keys) != 1:
        raise ctx.fail(f"a generator entry needs exactly one generator, found {keys or 'none'}")
    key = keys[0]
    if key in UNSUPPORTED and key not in GENERATORS:
        raise ctx.fail(
            f"the {key} generator is not supported by driftguard (it needs an SCM API or a cluster "
            f"resource a PR check cannot read); supported: {', '.join(GENERATORS)}"
        )
    if key not in GENERATORS:
        raise ctx.fail(f"contains unrecognized generators: {key}")
    return str(key)


def transform(entry: Any, ctx: Context, *, nested: bool = False) -> list[Generated]:
    """Parameter sets of one generator entry; ``nested`` for matrix and merge children."""
    key = generator_key(entry, ctx)
    spec = entry[key]
    if not isinstance(spec, dict):
        raise ctx.fail(f"generator {key} must be a map")
    generator = GENERATORS[key]
    generated = generator.generate(spec, ctx, nested=lambda child: transform(child, ctx, nested=True))
    ctx.check_sets(len(generated), key)
    if generator.takes_values:
        generated = apply_values(generated, spec.get("values"), ctx)
    selector = entry.get("selector")
    if not selector:
        return generated
    kept = []
    for g in generated:
        if selector_matches(selector, g.params, ctx):
            kept.append(g)
        else:
            ctx.dropped.append(
                Dropped(
                    g.origins, f"the generator's selector ({describe_selector(selector)}) does not match it"
                )
            )
    return kept

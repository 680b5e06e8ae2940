"""Helm chart analysis: what a chart's values decide, proposed from the templates and proved by render.

``switches`` (the values keys that decide whether whole documents render), ``switch_eval`` (a
switch's condition over the values), ``chart_values`` (the values as helm sees them),
``flip_proof`` (proof by render), ``removal_cause`` (the key behind a removal), ``helmignore`` and
``schema_refs``. The guards (``cmp_plugin.guards``) and the PR check (``cmp_plugin.prcheck``) use
it; it uses the render path below it (renderers, scan), never the guards.
"""

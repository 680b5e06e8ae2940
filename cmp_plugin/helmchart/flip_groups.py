"""How the flip proof (flip_proof.py) groups candidate keys into renders: layers, colours, halves, suspects."""

from __future__ import annotations

from typing import Any

from cmp_plugin.helmchart.flip_records import Flip

_AT_VALUE: Any = None
_AT_FILE: Any = None


def _suspects(batch: list[Flip], said: str) -> list[Flip]:
    """The flips helm's error points at: the values path it could not evaluate (``executing
    "chart/charts/sub/templates/x.yaml" at <.Values.route.main>`` reads ``sub.route``) or the
    template that failed (``fail``: ``(chart/templates/x.yaml:7:4)``). Only a hint for regrouping:
    a flip is called failing only by a render of it alone."""
    global _AT_VALUE, _AT_FILE
    import re

    if _AT_VALUE is None:
        _AT_VALUE = re.compile(r'executing "([^"]+)" at <\$?\.Values((?:\.[A-Za-z0-9_-]+)+)')
        _AT_FILE = re.compile(r"[(\"]([^():\"\s]+/templates/[^():\"\s]+):\d+")
    paths = set()
    for m in _AT_VALUE.finditer(said):
        parts = m.group(1).split("/")[1:]  # the top chart's name first
        scope = "".join(f"{parts[i + 1]}." for i in range(len(parts) - 1) if parts[i] == "charts")
        paths.add(scope + m.group(2)[1:])
    files = {m.group(1).split("/", 1)[1] for m in _AT_FILE.finditer(said) if "/" in m.group(1)}
    return [
        f
        for f in batch
        if any(p == f.key or p.startswith(f.key + ".") for p in paths)
        or any(_covers(f.templates, x) for x in files)
    ]


def _halves(batch: list[Flip]) -> list[list[Flip]]:
    mid = len(batch) // 2
    return [batch[:mid], batch[mid:]]


def _covers(templates: tuple[str, ...], template: str) -> bool:
    return any(template == t or template.startswith(t.rstrip("/") + "/") for t in templates)


def _overlap(a: Flip, b: Flip) -> bool:
    if _nested(a, b):
        return True  # both in one values document: one would overwrite the other
    if not a.templates or not b.templates:
        return True
    return any(_covers(b.templates, t) for t in a.templates) or any(
        _covers(a.templates, t) for t in b.templates
    )


def _colour(flips: list[Flip]) -> list[list[Flip]]:
    """Groups of flips whose templates do not overlap (greedy, in the order given)."""
    groups: list[list[Flip]] = []
    for f in flips:
        for g in groups:
            if not any(_overlap(f, o) for o in g):
                g.append(f)
                break
        else:
            groups.append([f])
    return groups


def _layers(flips: list[Flip]) -> list[list[Flip]]:
    """Every flip in one render, except where one key nests in another (``a`` removed, ``a.enabled``
    set: one values document cannot hold both) or one key's templates hold all of another's (a
    subchart's ``condition`` and the keys inside it, ``notifications.enabled`` and
    ``notifications.serviceAccount.create``: with the outer key flipped the inner key's removals
    could not be told apart); the outer key goes to the next layer. Narrow keys are placed first;
    keys turned on and maps removed, likelier to break a render, have layers of their own."""
    layers: list[list[Flip]] = []
    # keys turned off first; keys turned on (``not`` defaults: what they enable may ``fail`` for
    # want of configuration) and maps removed (``nil pointer evaluating .main`` where a template
    # reads under one unguarded) in later layers: one failing flip fails its whole render
    for f in sorted(flips, key=lambda f: (_risk(f), len(f.templates))):
        for layer in layers:
            if _risk(layer[0]) != _risk(f):
                continue
            if not any(_nested(f, o) or _contains(f, o) or _contains(o, f) for o in layer):
                layer.append(f)
                break
        else:
            layers.append([f])
    return layers


def _risk(f: Flip) -> int:
    """0: a key turned off; 1: turned on or a map removed (flips that may break a render)."""
    return 1 if f.value is None or f.value is True else 0


def _contains(a: Flip, b: Flip) -> bool:
    """Whether ``a``'s templates hold every one of ``b``'s."""
    return bool(b.templates) and all(_covers(a.templates, t) for t in b.templates)


def _nested(a: Flip, b: Flip) -> bool:
    return a.key == b.key or a.key.startswith(b.key + ".") or b.key.startswith(a.key + ".")

"""Where a rendered value comes from: the candidate edits ``codify`` tries, best first.

Helm: the values keys that hold the rendered value (a leaf equal to it, or a part of it such as an
image tag), ranked by whether the template that emits the resource reads them (``.Values.x.y``,
``with``/``toYaml`` blocks near the field's key); for a field the render does not have yet, the
values map the template writes at the field's parent. Kustomize: an ``images:`` entry for an image,
else a JSON 6902 patch in the overlay. Plain manifests: the line itself. Each candidate is a
guess until ``codify`` proves it by rendering.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from cmp_plugin.repotools.codify_edit import Path_
from driftguard.diff import _quantity

__all__ = ["Candidate", "helm_candidates", "template_refs", "values_leaves"]

_REF = re.compile(r"\.Values((?:\.[A-Za-z_][\w-]*)+)")
_INDEX = re.compile(r"index\s+\.Values\s+((?:\"[^\"]+\"\s*)+)")
MAX_CANDIDATES = 8


class Candidate(NamedTuple):
    """One values key to set (``path`` in the values document) to ``value``; ``why`` for people."""

    path: Path_
    value: Any
    score: int
    why: str


def values_leaves(node: Any, prefix: Path_ | None = None) -> Iterator[tuple[Path_, Any]]:
    """Every node of a values tree with its path, parents before children."""
    prefix = prefix or []
    if prefix:
        yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from values_leaves(v, [*prefix, str(k)])
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from values_leaves(v, [*prefix, i])


def template_refs(text: str) -> list[tuple[int, str]]:
    """(line, dotted key) of every ``.Values.a.b`` / ``index .Values "a" "b"`` in a template."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        out += [(n, m.group(1)[1:]) for m in _REF.finditer(line)]
        for m in _INDEX.finditer(line):
            out.append((n, ".".join(re.findall(r"\"([^\"]+)\"", m.group(1)))))
    return out


def same_value(a: Any, b: Any) -> bool:
    """Equal as Kubernetes reads them: ``2`` and ``"2"`` are one quantity, ``True`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if a == b:
        return True
    qa, qb = _quantity(a), _quantity(b)
    return (
        qa is not None and qa == qb and isinstance(a, str | int | float) and isinstance(b, str | int | float)
    )


def typed_like(wanted: Any, like: Any) -> list[Any]:
    """``wanted`` in the old value's type first (a values key that held ``2`` gets ``4``, not ``"4"``)."""
    from driftguard.manifests import safe_load

    out: list[Any] = []
    if isinstance(like, str) and isinstance(wanted, int | float) and not isinstance(wanted, bool):
        out.append(str(wanted))
    elif isinstance(like, int | float) and not isinstance(like, bool) and isinstance(wanted, str):
        try:
            parsed = safe_load(wanted)
        except Exception:
            parsed = None
        if isinstance(parsed, int | float) and not isinstance(parsed, bool):
            out.append(parsed)
    out.append(wanted)
    return out


def _referenced(path: Path_, refs: list[tuple[int, str]]) -> bool:
    dotted = ".".join(str(p) for p in path if not isinstance(p, int))
    return any(dotted == r or dotted.startswith(r + ".") or r.startswith(dotted + ".") for _, r in refs)


def helm_candidates(
    *,
    old: Any,
    wanted: Any,
    tokens: list[str],
    ancestor: Any,
    rest: list[str],
    values: Any,
    template: str,
    helpers: str = "",
) -> list[Candidate]:
    """Values keys that could make the render hold ``wanted`` at the pointer (``tokens``).

    ``old`` is the rendered value there (None when the render lacks it: then ``ancestor`` is the
    deepest rendered parent and ``rest`` the missing tokens below it).
    """
    refs = template_refs(template)
    out: list[Candidate] = []
    if rest:
        out += _missing_field(ancestor, rest, wanted, values, refs, template, tokens)
    else:
        if isinstance(old, str) and isinstance(wanted, str):
            out += _defaulted(old, wanted, values, tokens, template, helpers)
        for path, leaf in values_leaves(values):
            bonus = (3 if _referenced(path, refs) else 0) + (1 if str(path[-1]) == tokens[-1] else 0)
            if isinstance(leaf, dict | list) or isinstance(old, dict | list):
                if isinstance(leaf, dict | list) and leaf and leaf == old:
                    out.append(Candidate(path, wanted, 10 + bonus, "holds the rendered value"))
                continue
            if same_value(leaf, old):
                for i, v in enumerate(typed_like(wanted, leaf)):
                    out.append(Candidate(path, v, 20 + bonus - i, "holds the rendered value"))
            elif isinstance(old, str) and isinstance(wanted, str) and isinstance(leaf, str | int | float):
                out += _part_of(path, str(leaf), old, wanted, bonus, leaf)
    seen: set[str] = set()
    unique = []
    for c in sorted(out, key=lambda c: (-c.score, len(c.path))):
        key = repr((c.path, c.value))
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique[:MAX_CANDIDATES]


_SEPARATORS = ":/@=, "


def changed_part(old: str, new: str) -> tuple[str, str] | None:
    """The part of ``old`` that ``new`` replaces, widened to separators (``1.8.2`` in ``repo:1.8.2``)."""
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    q = 0
    while q < min(len(old), len(new)) - p and old[len(old) - 1 - q] == new[len(new) - 1 - q]:
        q += 1
    while p > 0 and old[p - 1] not in _SEPARATORS:
        p -= 1
    while q > 0 and old[len(old) - q] not in _SEPARATORS:
        q -= 1
    mid_old, mid_new = old[p : len(old) - q], new[p : len(new) - q]
    return (mid_old, mid_new) if mid_new and mid_old != mid_new else None


def _defaulted(
    old: str, wanted: str, values: Any, tokens: list[str], template: str, helpers: str
) -> list[Candidate]:
    """A part of the rendered value no values key holds (``tag | default .Chart.AppVersion``):
    the empty keys read on the field's own line, or in the named templates that line includes."""
    from cmp_plugin.helmchart.chart_values import lookup

    part = changed_part(old, wanted)
    if part is None or not tokens or tokens[-1].isdigit():
        return []
    near: list[str] = []
    included: list[str] = []
    included_text = ""
    key_line = re.compile(r"^\s*-?\s*" + re.escape(tokens[-1]) + r"\s*:(.*)$")
    for line in template.splitlines():
        m = key_line.match(line)
        if m:
            near += [r for _, r in template_refs(line)]
            for name in re.findall(r"(?:include|template)\s+\"([^\"]+)\"", m.group(1)):
                block = define_block(helpers, name)
                included_text += block
                included += [r for _, r in template_refs(block)]
    out = []
    for score, group in ((9, near), (8, included)):
        for ref in group:
            found, node = lookup(values, ref)
            if not found or node in (None, ""):
                why = f"is read on the field's line and empty ({part[0]!r} is the template's default)"
                out.append(Candidate(list[str | int](ref.split(".")), part[1], score, why))
            elif isinstance(node, dict) and score == 9:
                # a values map handed to a named template (`tuple .Values.image ...`): the fields
                # that template reads from its arguments and the map leaves empty
                for child in sorted(set(re.findall(r"\$\w+\.(\w+)", included_text)) - {"Values"}):
                    if node.get(child) in (None, ""):
                        why = f"is read by the named template the field's line calls, and empty ({part[0]!r} is its default)"
                        out.append(Candidate([*ref.split("."), child], part[1], 7, why))
    return out


def define_block(helpers: str, name: str) -> str:
    """The text of ``{{ define "name" }} ... {{ end }}`` (up to the next define), or ""."""
    m = re.search(
        r"\{\{-?\s*define\s+\"" + re.escape(name) + r"\"\s*-?\}\}(.*?)(?=\{\{-?\s*define\s|\Z)", helpers, re.S
    )
    return m.group(1) if m else ""


def _part_of(path: Path_, leaf: str, old: str, wanted: str, bonus: int, raw: Any) -> list[Candidate]:
    """A leaf that is a part of the rendered string (``image.tag`` in ``repo:tag``)."""
    if len(leaf) < 2 or isinstance(raw, bool):
        return []
    out = []
    for at in {old.find(leaf), old.rfind(leaf)} - {-1}:
        prefix, suffix = old[:at], old[at + len(leaf) :]
        if wanted.startswith(prefix) and wanted.endswith(suffix) and len(wanted) >= len(prefix) + len(suffix):
            part = wanted[len(prefix) : len(wanted) - len(suffix)]
            if part and part != leaf:
                for i, v in enumerate(typed_like(part, raw)):
                    out.append(
                        Candidate(path, v, 15 + bonus - i, f"is the part {leaf!r} of the rendered value")
                    )
    return out


def _missing_field(
    ancestor: Any,
    rest: list[str],
    wanted: Any,
    values: Any,
    refs: list[tuple[int, str]],
    template: str,
    tokens: list[str],
) -> list[Candidate]:
    """A field the render lacks: under a values map rendered whole at its parent, or the map the
    template writes (``with``/``toYaml``) next to the line of one of the missing keys."""
    from cmp_plugin.helmchart.chart_values import lookup

    out: list[Candidate] = []
    if isinstance(ancestor, dict) and ancestor:
        for path, node in values_leaves(values):
            if isinstance(node, dict) and node == ancestor:
                bonus = 3 if _referenced(path, refs) else 0
                out.append(
                    Candidate([*path, *rest], wanted, 12 + bonus, "is rendered whole at the field's parent")
                )
    lines = template.splitlines()
    # the missing keys, and the rendered parent's own key (``annotations:`` that holds a checksum)
    head = tokens[len(tokens) - len(rest) - 1 : len(tokens) - len(rest)] if len(tokens) > len(rest) else []
    for j, seg in enumerate([*head, *rest], start=-len(head)):
        if seg.isdigit():
            continue
        key_line = re.compile(r"^\s*" + re.escape(seg) + r"\s*:")
        for n, line in enumerate(lines, 1):
            if not key_line.match(line):
                continue
            for ln, ref in refs:
                if abs(ln - n) > 3:
                    continue
                found, node = lookup(values, ref)
                if found and node not in (None, "") and not isinstance(node, dict):
                    continue
                under: Path_ = [*ref.split("."), *rest[j + 1 :]]
                if len(under) > len(ref.split(".")):
                    out.append(
                        Candidate(
                            under, wanted, 8 - abs(ln - n), f"is written at `{seg}:` (template line {n})"
                        )
                    )
    return out


def literal_line(template: str, tokens: list[str], old: Any) -> int | None:
    """The template line that writes the old value literally under the field's key, if one does."""
    key = re.escape(tokens[-1]) if tokens and not tokens[-1].isdigit() else None
    if key is None or isinstance(old, dict | list):
        return None
    text = str(old).lower() if isinstance(old, bool) else str(old)
    pattern = re.compile(r"^\s*-?\s*" + key + r"\s*:\s*['\"]?" + re.escape(text) + r"['\"]?\s*(#.*)?$")
    for n, line in enumerate(template.splitlines(), 1):
        if pattern.match(line):
            return n
    return None


def template_of(source: str, app_dir: Path) -> tuple[str, str]:
    """(relative path, text) of the template a ``# Source: chart/templates/x.yaml`` names."""
    rel = source.split("/", 1)[1] if "/" in source else source
    path = app_dir / rel
    try:
        resolved = path.resolve()
        if resolved.is_relative_to(app_dir.resolve()) and resolved.is_file():
            return rel, resolved.read_text(errors="replace")
    except OSError:
        pass
    return rel, ""

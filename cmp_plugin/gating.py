"""Which values keys decide whether whole resources render, read from a chart's templates.

A Go-template action scanner (not a full parser): it follows ``if`` / ``else if`` / ``with`` /
``range`` / ``define`` / ``block`` / ``end`` nesting, collects ``.Values.a.b`` and ``$.Values.a.b``
references in the conditions (inside ``and``, ``or``, ``not``, ``eq``, ``ne``, ``default``,
``hasKey``, ``dig``, ``index`` and parentheses too; ``with .Values.x`` makes ``.y`` mean
``x.y``), and keeps the conditions whose block holds resource content: a ``kind:`` line, or an
``include`` / ``template`` of a named template that does. Subcharts add their Chart.yaml
``condition:`` and ``tags:`` keys and their own templates, scoped under their name or alias.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

from driftguard.manifests import safe_load

__all__ = ["Gate", "find_gates", "lookup", "merge_values", "truthy"]

_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)
_VALUES_REF = re.compile(r"\$?\.Values((?:\.[A-Za-z0-9_-]+)+)")
_DOT_REF = re.compile(r"(?<![\w$\)\]])\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)")
_DIG = re.compile(r"\bdig\s+(.+?)\s+\$?\.Values\b")
_HASKEY = re.compile(r"\bhasKey\s+\$?\.Values((?:\.[A-Za-z0-9_-]+)*)\s+\"([^\"]+)\"")
_INDEX = re.compile(r"\bindex\s+\$?\.Values((?:\.[A-Za-z0-9_-]+)*)((?:\s+\"[^\"]+\")+)")
_INCLUDE = re.compile(r"\b(?:include|template)\s+\"([^\"]+)\"")
_KIND_LINE = re.compile(r"^\s*kind:\s*\S", re.M)
_OPENERS = ("if", "with", "range", "define", "block")
_BUILTIN_DOTS = {"Values", "Release", "Chart", "Capabilities", "Template", "Files"}


class Gate(NamedTuple):
    """A values key that gates resource content."""

    key: str
    """Dotted path from the top of the (parent) chart's values, e.g. ``redis.enabled``."""
    file: str
    """Where it is used: a template path relative to the chart, or Chart.yaml."""
    line: int
    keyword: str
    """if, else if, with, range, condition or tags."""
    condition: str
    """The condition as written."""
    resources: tuple[str, ...] = ()
    """``Kind name`` of each resource in the gated block, as written in the template."""


class _Block:
    """An open ``if``/``with``/``range``/``define``/``block`` while a template is read."""

    __slots__ = ("branches", "condition", "dot", "keyword", "line", "refs", "start")

    def __init__(
        self, keyword: str, line: int, start: int, refs: list[str], condition: str, dot: str | None
    ) -> None:
        self.keyword, self.line, self.start = keyword, line, start
        self.refs, self.condition, self.dot = refs, condition, dot
        self.branches: list[tuple[int, int, list[str], str, str]] = []
        """(start, line, refs, keyword, condition) of each ``else if`` / ``else`` branch."""


def find_gates(chart_dir: Path) -> list[Gate]:
    """Every gating key of a chart and its vendored subcharts (directories under charts/)."""
    return _chart_gates(chart_dir, prefix="")


def _chart_gates(chart_dir: Path, *, prefix: str) -> list[Gate]:
    gates: list[Gate] = []
    templates = (
        sorted(p for p in (chart_dir / "templates").rglob("*") if p.is_file())
        if (chart_dir / "templates").is_dir()
        else []
    )
    texts = {p: p.read_text(errors="replace") for p in templates}
    defines = _defines_with_resources(texts.values())
    for path, text in texts.items():
        rel = str(path.relative_to(chart_dir))
        for gate in _template_gates(text, rel, defines):
            gates.append(
                Gate(prefix + gate.key, gate.file, gate.line, gate.keyword, gate.condition, gate.resources)
            )
    gates += _subchart_gates(chart_dir, prefix=prefix)
    return gates


def _subchart_gates(chart_dir: Path, *, prefix: str) -> list[Gate]:
    import yaml

    chart_file = chart_dir / "Chart.yaml"
    try:
        chart = safe_load(chart_file.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    deps = chart.get("dependencies") if isinstance(chart, dict) else None
    gates: list[Gate] = []
    lines = chart_file.read_text().splitlines()
    for dep in deps if isinstance(deps, list) else []:
        if not isinstance(dep, dict) or not dep.get("name"):
            continue
        name = str(dep["name"])
        scope = str(dep.get("alias") or name)
        line = next(
            (
                i + 1
                for i, text in enumerate(lines)
                if re.search(rf"name:\s*['\"]?{re.escape(name)}['\"]?\s*$", text)
            ),
            1,
        )
        subdir = chart_dir / "charts" / name
        kinds = _subchart_resources(subdir)
        for cond in str(dep.get("condition") or "").split(","):
            if cond.strip():
                gates.append(
                    Gate(prefix + cond.strip(), "Chart.yaml", line, "condition", cond.strip(), kinds)
                )
        for tag in dep.get("tags") or []:
            gates.append(Gate(prefix + f"tags.{tag}", "Chart.yaml", line, "tags", str(tag), kinds))
        if subdir.is_dir():
            for gate in _chart_gates(subdir, prefix=f"{prefix}{scope}."):
                gates.append(
                    Gate(
                        gate.key,
                        f"charts/{name}/{gate.file}",
                        gate.line,
                        gate.keyword,
                        gate.condition,
                        gate.resources,
                    )
                )
    return gates


def _subchart_resources(subdir: Path) -> tuple[str, ...]:
    found: list[str] = []
    if (subdir / "templates").is_dir():
        for path in sorted((subdir / "templates").rglob("*.yaml")):
            found += _resources_in(path.read_text(errors="replace"))
    return tuple(found) or (f"everything in charts/{subdir.name}",)


def _defines_with_resources(texts: Any) -> set[str]:
    """Names of ``define`` blocks whose body holds resource content (directly or by include)."""
    bodies: dict[str, str] = {}
    for text in texts:
        for m in re.finditer(
            r"\{\{-?\s*define\s+\"([^\"]+)\"\s*-?\}\}(.*?)\{\{-?\s*end\s*-?\}\}", text, re.S
        ):
            bodies[m.group(1)] = m.group(2)
    with_resources = {name for name, body in bodies.items() if _KIND_LINE.search(_strip_actions(body))}
    changed = True
    while changed:  # a define that includes one with resources has resources too
        changed = False
        for name, body in bodies.items():
            if name not in with_resources and any(inc in with_resources for inc in _INCLUDE.findall(body)):
                with_resources.add(name)
                changed = True
    return with_resources


def _strip_actions(text: str) -> str:
    return _ACTION.sub("", text)


def _template_gates(text: str, rel: str, defines: set[str]) -> list[Gate]:
    gates: list[Gate] = []
    stack: list[_Block] = []
    for m in _ACTION.finditer(text):
        body = m.group(1)
        if body.startswith("/*"):
            continue
        word = body.split(None, 1)[0] if body.split() else ""
        line = text.count("\n", 0, m.start()) + 1
        dot = stack[-1].dot if stack else ""
        if word in _OPENERS:
            expr = body[len(word) :].strip()
            refs = _refs(expr, dot) if word in ("if", "with", "range") else []
            new_dot: str | None
            if word == "with":
                inner = _VALUES_REF.fullmatch(expr.strip())
                new_dot = inner.group(1)[1:] if inner else None
            elif word in ("range", "define", "block"):
                new_dot = None if word == "range" else ""
            else:
                new_dot = dot
            stack.append(_Block(word, line, m.end(), refs, f"{word} {expr}", new_dot))
        elif word == "else" and stack:
            block = stack[-1]
            rest = body[4:].strip()
            kw = (
                "else if" if rest.startswith("if ") else ("else with" if rest.startswith("with ") else "else")
            )
            expr = rest.split(None, 1)[1] if kw != "else" and len(rest.split(None, 1)) > 1 else ""
            refs = _refs(expr, block.dot if block.keyword != "with" else dot) if kw != "else" else block.refs
            block.branches.append((m.start(), line, refs, kw, f"{kw} {expr}".strip()))
        elif word == "end" and stack:
            block = stack.pop()
            if block.keyword in ("define", "block"):
                continue
            # the block and each of its else branches: (start, line, refs, keyword, condition)
            segments = [
                (block.start, block.line, block.refs, block.keyword, block.condition),
                *block.branches,
            ]
            bounds = [s[0] for s in segments[1:]] + [m.start()]
            for (start, bline, refs, kw, cond), stop in zip(segments, bounds, strict=True):
                content = text[start:stop]
                resources = _resources_in(content)
                if not resources and not any(inc in defines for inc in _INCLUDE.findall(content)):
                    continue
                keyword = block.keyword if kw == "else" else kw
                for key in refs:
                    gates.append(Gate(key, rel, bline, keyword, cond, tuple(resources)))
    return _dedupe(gates)


def _dedupe(gates: list[Gate]) -> list[Gate]:
    seen: set[tuple[str, str, int]] = set()
    out = []
    for g in gates:
        if (g.key, g.file, g.line) not in seen:
            seen.add((g.key, g.file, g.line))
            out.append(g)
    return out


def _resources_in(content: str) -> list[str]:
    """``Kind name`` for each top-level ``kind:`` in a block, names as written (templated or not)."""
    found = []
    for doc in re.split(r"^---", content, flags=re.M):
        kind = re.search(r"^kind:\s*(\S+)", doc, re.M)
        if kind is None:
            kind = re.search(r"^\s*kind:\s*(\S+)", doc, re.M)
        if kind is None:
            continue
        name = re.search(r"^  name:\s*(.+)$", doc, re.M) or re.search(r"^\s+name:\s*(.+)$", doc, re.M)
        found.append(f"{kind.group(1)} {name.group(1).strip() if name else '?'}")
    return found


def _refs(expr: str, dot: str | None) -> list[str]:
    """Values keys an expression reads; ``dot`` is the values path that ``.`` stands for (None: not values)."""
    keys: list[str] = [m.group(1)[1:] for m in _VALUES_REF.finditer(expr)]
    for m in _DIG.finditer(expr):
        args = re.findall(r"\"[^\"]*\"|\S+", m.group(1))[:-1]  # dig "k1" "k2" DEFAULT .Values
        keys.append(".".join(a.strip('"') for a in args if a.startswith('"')))
    for m in _HASKEY.finditer(expr):
        keys.append(".".join(p for p in (m.group(1)[1:], m.group(2)) if p))
    for m in _INDEX.finditer(expr):
        keys.append(".".join(p for p in (m.group(1)[1:], *re.findall(r"\"([^\"]+)\"", m.group(2))) if p))
    if dot is not None:
        cleaned = _VALUES_REF.sub("", expr)
        for m in _DOT_REF.finditer(cleaned):
            path = m.group(1)
            if path.split(".")[0] in _BUILTIN_DOTS:
                continue
            keys.append(f"{dot}.{path}" if dot else path)
    out: list[str] = []
    for k in keys:
        if k and k not in out:
            out.append(k)
    # the longest paths say the most: drop a key that only prefixes another one read here
    return [k for k in out if not any(o != k and o.startswith(k + ".") for o in out)]


def lookup(values: Any, key: str) -> tuple[bool, Any]:
    """(set, value) of a dotted key; an ancestor set to a non-mapping counts as set (it decides)."""
    node = values
    for part in key.split("."):
        if not isinstance(node, dict):
            return True, None
        if part not in node:
            return False, None
        node = node[part]
    return True, node


def merge_values(base: Any, override: Any) -> Any:
    """Helm's coalescing of values files: maps merge, anything else replaces; null deletes."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return override
    out = dict(base)
    for k, v in override.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_values(out.get(k), v)
    return out


def truthy(value: Any) -> bool:
    """Go template truth: false, 0, nil, empty string/map/list are false."""
    return bool(value)

"""A chart's values as helm sees them: defaults, vendored subcharts, which of them are enabled.

Helm's rules, followed from helm pkg/chartutil/dependencies.go (processDependencyEnabled,
processDependencyTags, processDependencyConditions, processImportValues) and coalesce.go:
- every dependency starts enabled; ``tags`` (read from the top-level ``tags`` table) disable it
  when at least one of its tags is false and none is true; then the first ``condition`` path (comma
  separated, under the parent's prefix) that holds a boolean decides, over the tags;
- a disabled chart takes its own dependencies with it;
- ``import-values`` of an *enabled* dependency copy a child table (``exports.<name>`` for the
  string form) into the parent's values, below the parent's own values in priority;
- values files merge maps and replace everything else; ``null`` deletes a key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

from cmp_plugin.content_cache import cache_get, cache_put, content_key
from cmp_plugin.helmchart.switches import Subchart
from driftguard.errors import InputError
from driftguard.manifests import safe_load

__all__ = [
    "MAX_DEPTH",
    "Dependency",
    "dependencies",
    "enabled",
    "load_values",
    "lookup",
    "merge_values",
    "own_values",
    "set_values",
    "truthy",
    "use_cache",
    "with_defaults",
]

_DEP_NAME_LINE = re.compile(r"^\s*-?\s*name:\s*['\"]?([^'\"\s#]+)", re.M)


class Dependency(NamedTuple):
    """One vendored subchart, with what decides whether helm renders it."""

    sub: Subchart
    parent: str
    """The parent's values prefix ("" for the top chart)."""
    parent_path: str
    """The parent's path relative to the top chart ("" for the top chart)."""
    import_values: tuple[Any, ...]
    defaults: dict[str, Any]
    """The subchart's own values.yaml (its subcharts' defaults merged in)."""


def load_values(text: str, origin: str) -> dict[str, Any]:
    """A values document; InputError naming ``origin`` when it is not YAML or not a mapping."""
    doc = _yaml(text, origin)
    if doc is not None and not isinstance(doc, dict):
        raise InputError(f"{origin} must be a YAML mapping of values")
    return doc or {}


def _yaml(text: str, origin: str) -> Any:
    """safe_load through the content-keyed cache: on a hit neither PyYAML is imported nor a value built."""
    cache = _CACHE[0]
    key = "yaml-" + content_key(text) if cache is not None else ""
    if cache is not None:
        hit = cache_get(cache, key)
        if isinstance(hit, dict) and "doc" in hit:
            return hit["doc"]
    import yaml

    try:
        doc = safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{origin} is not valid YAML: {exc}") from exc
    if cache is not None:
        cache_put(cache, key, {"doc": doc})
    return doc


def _chart_meta(chart_dir: Path) -> tuple[dict[str, Any], str]:
    try:
        text = (chart_dir / "Chart.yaml").read_text(errors="replace")
        meta = _yaml(text, "Chart.yaml") or {}
    except (OSError, InputError):
        return {}, ""
    return (meta if isinstance(meta, dict) else {}), text


_CACHE: list[Path | None] = [None]
"""Where parsed values.yaml files are kept as JSON (set by :func:`use_cache`): YAML construction
costs ~50 ms on a large chart, reading JSON back a few."""


def use_cache(cache_dir: Path | None) -> None:
    _CACHE[0] = cache_dir


def own_values(chart_dir: Path) -> dict[str, Any]:
    """A chart's values.yaml ({} when absent or broken: helm then fails and says why)."""
    path = chart_dir / "values.yaml"
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {}
    try:
        return load_values(text, str(path.name))
    except InputError:
        return {}


MAX_DEPTH = 8
"""Subchart nesting read at most (a symlinked ``charts/x -> ..`` must not recurse for ever)."""


def dependencies(
    chart_dir: Path, *, _parent: str = "", _path: str = "", _source: str = ""
) -> list[Dependency]:
    """Every vendored subchart (directories under charts/, recursively), declared or not."""
    if _path.count("charts/") >= MAX_DEPTH:
        return []
    meta, text = _chart_meta(chart_dir)
    lines: dict[str, int] = {}
    line, at = 1, 0
    for m in _DEP_NAME_LINE.finditer(text):
        line, at = line + text.count("\n", at, m.start()), m.start()
        lines.setdefault(m.group(1), line)
    by_name: dict[str, Path] = {}
    charts = chart_dir / "charts"
    if charts.is_dir():
        for sub in sorted(p for p in charts.iterdir() if p.is_dir() and (p / "Chart.yaml").is_file()):
            sub_meta, _ = _chart_meta(sub)
            by_name.setdefault(str(sub_meta.get("name") or sub.name), sub)
    declared = meta.get("dependencies") if isinstance(meta.get("dependencies"), list) else []
    out: list[Dependency] = []
    seen: set[str] = set()
    for dep in declared or []:
        if not isinstance(dep, dict) or not dep.get("name"):
            continue
        name = str(dep["name"])
        sub_dir = by_name.get(name)
        if sub_dir is None:
            continue  # a .tgz or missing: helm builds or refuses it; its templates are not read here
        seen.add(name)
        scope = str(dep.get("alias") or name)
        tags = tuple(str(t) for t in dep.get("tags") or [] if isinstance(dep.get("tags"), list))
        imports = tuple(dep.get("import-values") or ()) if isinstance(dep.get("import-values"), list) else ()
        out += _dependency(
            sub_dir, name=scope, cond=str(dep.get("condition") or ""), tags=tags, line=lines.get(name, 1),
            imports=imports, parent=_parent, path=_path, source=_source,
        )  # fmt: skip
    for name, sub_dir in by_name.items():
        if name not in seen:  # vendored without a declaration: helm renders it, always
            out += _dependency(
                sub_dir, name=name, cond="", tags=(), line=1, imports=(), parent=_parent, path=_path,
                source=_source,
            )  # fmt: skip
    return out


def _dependency(
    sub_dir: Path,
    *,
    name: str,
    cond: str,
    tags: tuple[str, ...],
    line: int,
    imports: tuple[Any, ...],
    parent: str,
    path: str,
    source: str,
) -> list[Dependency]:
    rel = f"{path}charts/{sub_dir.name}"
    sub = Subchart(rel, f"{parent}{name}.", cond, tags, line, f"{source}charts/{name}")
    nested = dependencies(sub_dir, _parent=sub.scope, _path=rel + "/", _source=sub.source + "/")
    defaults = own_values(sub_dir)
    for d in nested:
        if d.parent == sub.scope:
            defaults = merge_values({d.sub.scope[len(sub.scope) : -1]: d.defaults}, defaults)
    return [Dependency(sub, parent, path, imports, defaults), *nested]


def with_defaults(
    own: dict[str, Any], deps: list[Dependency], on: dict[str, bool] | None = None
) -> dict[str, Any]:
    """The top chart's values (``own``) over its subcharts' defaults, with the enabled ones' import-values."""
    values = own
    direct = [d for d in deps if d.parent == ""]
    for d in direct:
        values = merge_values({d.sub.scope[:-1]: d.defaults}, values)
        sub_global = d.defaults.get("global")
        if isinstance(sub_global, dict):
            values = merge_values({"global": sub_global}, values)
    if on is None:
        return values
    imported: dict[str, Any] = {}
    for d in deps:
        if not on.get(d.sub.path, True) or not d.import_values:
            continue
        for iv in d.import_values:
            if (
                isinstance(iv, dict)
                and isinstance(iv.get("child"), str)
                and isinstance(iv.get("parent"), str)
            ):
                child, target = iv["child"], iv["parent"]
            elif isinstance(iv, str):
                child, target = f"exports.{iv}", "."
            else:
                continue
            found, table = lookup(values, d.sub.scope + child)
            if not found or not isinstance(table, dict):
                continue
            where = d.parent + ("" if target == "." else target)
            imported = merge_values(imported, _nest(where.strip("."), table))
    return merge_values(imported, values) if imported else values


def _nest(path: str, table: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = table
    for part in reversed([p for p in path.split(".") if p]):
        out = {part: out}
    return out


def enabled(deps: list[Dependency], values: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    """Subchart path -> (rendered?, the key that decided it or ""), by helm's tags-then-condition rule."""
    out: dict[str, tuple[bool, str]] = {}
    tags_table = values.get("tags") if isinstance(values.get("tags"), dict) else None
    for d in deps:  # parents come before their children
        if d.parent_path and not out.get(d.parent_path.rstrip("/"), (True, ""))[0]:
            out[d.sub.path] = (False, out[d.parent_path.rstrip("/")][1])
            continue
        on, why = True, ""
        if tags_table is not None and d.sub.tags:
            states = [tags_table[t] for t in d.sub.tags if isinstance(tags_table.get(t), bool)]
            if states and not any(states):
                on, why = False, f"tags.{d.sub.tags[0]}"
            elif any(states):
                why = f"tags.{next(t for t in d.sub.tags if tags_table.get(t) is True)}"
        for cond in d.sub.condition.split(","):
            cond = cond.strip()
            if not cond:
                continue
            found, value = lookup(values, d.parent + cond)
            if found and isinstance(value, bool):
                on, why = value, d.parent + cond
                break
        out[d.sub.path] = (on, why)
    return out


def set_values(entries: Any, *, kind: str = "set") -> dict[str, Any]:
    """Helm ``--set`` / ``--set-string`` / ``--set-file`` entries as a values document.

    ``entries``: ``["a.b=c", ...]`` or ``{"a.b": "c"}``. Keys split on unescaped dots; a list index
    (``a[0].b``) counts as setting its list. ``set`` types true/false/null/integers like helm's
    strvals; ``set-string`` keeps strings; ``set-file`` holds the file's name (its content is helm's
    business: the key is set, and a file's content is never empty enough to count as false here).
    """
    pairs: list[tuple[str, str]] = []
    if isinstance(entries, dict):
        pairs = [(str(k), str(v)) for k, v in entries.items()]
    else:
        for item in entries or []:
            key, sep, text = str(item).partition("=")
            if sep:
                pairs.append((key, text))
    doc: dict[str, Any] = {}
    for key, raw in pairs:
        parts = [p.replace("\\.", ".") for p in re.split(r"(?<!\\)\.", key.strip())]
        parts = [re.sub(r"\[\d+\]$", "", p) for p in parts]
        if not all(parts):
            continue
        value: Any = raw
        if kind == "set":
            value = {"true": True, "false": False, "null": None}.get(raw, raw)
            if isinstance(value, str) and re.fullmatch(r"-?(0|[1-9]\d{0,17})", raw):
                value = int(raw)
        node = doc
        for p in parts[:-1]:
            nxt = node.get(p)
            node[p] = nxt = nxt if isinstance(nxt, dict) else {}
            node = nxt
        node[parts[-1]] = value
    return doc


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

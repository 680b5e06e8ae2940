"""The files ``codify`` may edit for each renderer, and the edit each candidate makes there.

Only this environment's own inputs: Helm, the values files the Application names (the chart's
``values.yaml``, shared by every environment, only with ``--allow-chart`` when the Application
names none); kustomize, the overlay's kustomization (an ``images:`` entry) or a JSON 6902 patch
file added to it; plain manifests, the manifest's own line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cmp_plugin.repotools.codify_edit import Path_, set_in
from cmp_plugin.repotools.codify_search import helm_candidates, literal_line, template_of
from cmp_plugin.repotools.codify_spec import MISSING, Change, get_at, tokens
from driftguard.diff import escape
from driftguard.errors import DriftguardError

if TYPE_CHECKING:
    from cmp_plugin.repotools.codify_workspace import Render, Workspace

__all__ = ["Edit", "candidates"]


class Edit(NamedTuple):
    """A candidate: (file relative to the checkout, values path or None for the whole text, value, doc)."""

    edits: list[tuple[Path, Path_ | None, Any, int]]
    what: str


def candidates(ws: Workspace, before: Render, change: Change) -> Iterator[Edit | str]:
    """Candidate edits, best first; a string is a reason the search stops there."""
    from cmp_plugin.repotools.codify_workspace import find_key

    key = find_key(before, change)
    obj = before.objects[key]
    parts = tokens(change.pointer)
    if before.renderer == "helm":
        yield from _helm(ws, before, key, obj, parts, change.value)
    elif before.renderer == "kustomize":
        yield from _kustomize(ws, key, obj, parts, change.value)
    else:
        yield from _directory(ws, before, key, obj, parts, change.value)


def _split_missing(obj: Any, parts: list[str]) -> tuple[Any, Any, list[str]]:
    """(old value or MISSING, deepest rendered ancestor, the tokens below it that are missing)."""
    old = get_at(obj, parts)
    if old is not MISSING:
        return old, None, []
    k = len(parts)
    while k > 0 and get_at(obj, parts[:k]) is MISSING:
        k -= 1
    return MISSING, get_at(obj, parts[:k]), parts[k:]


def _rel(ws: Workspace, path: Path) -> Path | None:
    try:
        resolved = path.resolve()
    except OSError:
        return None
    if not resolved.is_relative_to(ws.root.resolve()):
        return None
    return resolved.relative_to(ws.root.resolve())


# --- Helm -----------------------------------------------------------------------------------


def _helm(
    ws: Workspace, before: Render, key: Any, obj: Any, parts: list[str], wanted: Any
) -> Iterator[Edit | str]:
    from cmp_plugin.helmchart.chart_values import load_values, merge_values

    env = ws.target.env
    chart_rel = _rel(ws, ws.app_dir / "values.yaml")
    files: list[tuple[Path, dict[str, Any]]] = []
    for entry in env.param("values-files"):
        rel = _rel(ws, ws.app_dir / entry)
        if rel is not None and (ws.root / rel).is_file():
            files.append((rel, load_values(ws.text(rel), str(rel)) or {}))
    defaults: dict[str, Any] = {}
    if chart_rel is not None and (ws.root / chart_rel).is_file():
        defaults = load_values(ws.text(chart_rel), str(chart_rel)) or {}
    merged: Any = defaults
    for _, doc in files:
        merged = merge_values(merged, doc)
    inline = env.param("values")
    inline_doc = load_values(inline, "parameter values") if str(inline).strip() else {}
    merged = merge_values(merged, inline_doc or {})
    old, ancestor, rest = _split_missing(obj, parts)
    tpl_rel, template = template_of(before.sources.get(key, ""), ws.app_dir)
    prefix, chart_dir, view = _subchart(ws.app_dir, tpl_rel, merged)
    found = [
        c._replace(path=[*prefix, *c.path])
        for c in helm_candidates(
            old=None if old is MISSING else old,
            wanted=wanted,
            tokens=parts,
            ancestor=ancestor,
            rest=rest,
            values=view,
            template=template,
            helpers=_helpers(chart_dir),
        )
    ]
    if not found:
        if old is not MISSING:
            line = literal_line(template, parts, old)
            if line is not None:
                yield f"the value is literal in the chart template ({tpl_rel}:{line}), not read from values"
                return
            yield f"no values key holds {old!r} and none the template ({tpl_rel}) reads there sets it"
        else:
            yield f"the template ({tpl_rel}) writes no values key at {'/'.join(parts[: len(parts) - len(rest)])}"
        return
    for cand in found:
        dotted = ".".join(str(p) for p in cand.path)
        if inline_doc and get_at(inline_doc, [str(p) for p in cand.path]) is not MISSING:
            yield f"`{dotted}` is set by the Application's `values` parameter: edit it in the Application"
            continue
        target = _values_target(files, cand.path, cand.value, merged)
        if target is None:
            if not ws.target.allow_chart or chart_rel is None:
                yield (
                    f"`{dotted}` {cand.why}, but this environment names no values file; the chart's "
                    "values.yaml holds the defaults every environment shares (--allow-chart edits it)"
                )
                continue
            target = (chart_rel, *_list_whole(defaults, cand.path, cand.value, merged))
        rel, path, value = target
        yield Edit(
            [(rel, path, value, 0)], f"set `{'.'.join(map(str, path))}` in {rel} ({dotted} {cand.why})"
        )


def _subchart(app_dir: Path, tpl_rel: str, merged: Any) -> tuple[list[str], Path, Any]:
    """For a template of a vendored subchart (``charts/a/charts/b/templates/x.yaml``): its values
    prefix in the parent's values (``a.b``, or the dependency's alias), its directory, and the
    values it sees (its own defaults under what the parents set for it)."""
    from cmp_plugin.helmchart.chart_values import load_values, merge_values

    parts = Path(tpl_rel).parts
    prefix: list[str] = []
    chart_dir = app_dir
    view = merged
    i = 0
    while i + 2 < len(parts) and parts[i] == "charts":
        name = parts[i + 1]
        alias = _alias(chart_dir, name)
        chart_dir = chart_dir / "charts" / name
        prefix.append(alias)
        own: Any = {}
        if (chart_dir / "values.yaml").is_file():
            own = load_values((chart_dir / "values.yaml").read_text(), str(chart_dir / "values.yaml")) or {}
        given = view.get(alias) if isinstance(view, dict) else None
        view = merge_values(own, given if isinstance(given, dict) else {})
        i += 2
    return prefix, chart_dir, view


def _alias(chart_dir: Path, name: str) -> str:
    """The values key of the vendored dependency ``name``: its alias in Chart.yaml, else its name."""
    from driftguard.manifests import safe_load

    try:
        meta = safe_load((chart_dir / "Chart.yaml").read_text())
    except Exception:  # no readable Chart.yaml: the directory is the name
        return name
    for dep in (meta or {}).get("dependencies") or [] if isinstance(meta, dict) else []:
        if isinstance(dep, dict) and dep.get("name") == name and dep.get("alias"):
            return str(dep["alias"])
    return name


def _helpers(app_dir: Path) -> str:
    """The chart's named templates (``templates/_*.tpl``): where image and name helpers live."""
    texts = []
    for path in sorted((app_dir / "templates").glob("_*.tpl"))[:20]:
        if path.is_file() and not path.is_symlink():
            texts.append(path.read_text(errors="replace"))
    return "\n".join(texts)


def _values_target(
    files: list[tuple[Path, dict[str, Any]]], path: Path_, value: Any, merged: Any
) -> tuple[Path, Path_, Any] | None:
    """The environment's values file to write ``path`` in: the last that sets it, else the last one."""
    if not files:
        return None
    for rel, doc in reversed(files):
        if get_at(doc, [str(p) for p in path]) is not MISSING:
            return rel, path, value
    rel, doc = files[-1]
    return (rel, *_list_whole(doc, path, value, merged))


def _list_whole(doc: Any, path: Path_, value: Any, merged: Any) -> tuple[Path_, Any]:
    """Helm replaces lists whole: an item of a list the file does not hold means writing the list."""
    for i, seg in enumerate(path):
        if isinstance(seg, int):
            head = path[:i]
            if get_at(doc, [str(p) for p in head]) is MISSING:
                whole = get_at(merged, [str(p) for p in head])
                return head, set_in(whole, path[i:], value)
    return path, value


# --- kustomize ------------------------------------------------------------------------------


_IMAGE = re.compile(r"^(?P<name>[^@]+?)(?::(?P<tag>[\w][\w.-]*))?(?:@(?P<digest>.+))?$")


def _kustomize(ws: Workspace, key: Any, obj: Any, parts: list[str], wanted: Any) -> Iterator[Edit | str]:
    from cmp_plugin.repotools.set_image import find_kustomization
    from driftguard.manifests import safe_load

    kfile = find_kustomization(ws.app_dir)
    krel = kfile.relative_to(ws.root)
    kdoc = safe_load(ws.text(krel)) or {}
    old, _, _ = _split_missing(obj, parts)
    if parts[-1] == "image" and isinstance(old, str) and isinstance(wanted, str):
        edit = _image_entry(krel, kdoc, old, wanted)
        if edit is not None:
            yield edit
    yield _patch(ws, krel, kdoc, key, obj, parts, wanted, old)


def _image_entry(krel: Path, kdoc: dict[str, Any], old: str, wanted: str) -> Edit | None:
    mo, mn = _IMAGE.match(old), _IMAGE.match(wanted)
    if mo is None or mn is None:
        return None
    images = kdoc.get("images") if isinstance(kdoc.get("images"), list) else None
    fields: dict[str, str] = {}
    if mn.group("tag"):
        fields["newTag"] = mn.group("tag")
    if mn.group("digest"):
        fields["digest"] = mn.group("digest")
    for i, entry in enumerate(images or []):
        if isinstance(entry, dict) and mo.group("name") in (entry.get("name"), entry.get("newName")):
            if mn.group("name") != mo.group("name"):
                fields["newName"] = mn.group("name")
            edits: list[tuple[Path, Path_ | None, Any, int]] = [
                (krel, ["images", i, k], v, 0) for k, v in fields.items()
            ]
            return Edit(edits, f"set the images: entry {entry.get('name')} in {krel}")
    if mn.group("name") != mo.group("name"):
        fields["newName"] = mn.group("name")
    entry = {"name": mo.group("name"), **fields}
    path: Path_ = ["images", len(images)] if images is not None else ["images"]
    return Edit(
        [(krel, path, entry if images is not None else [entry], 0)],
        f"add an images: entry {mo.group('name')} to {krel}",
    )


def _patch(
    ws: Workspace,
    krel: Path,
    kdoc: dict[str, Any],
    key: Any,
    obj: Any,
    parts: list[str],
    wanted: Any,
    old: Any,
) -> Edit | str:
    """A JSON 6902 patch file in the overlay (one per resource), listed under ``patches:``."""
    import yaml

    from cmp_plugin.repotools.codify_workspace import expected_value
    from driftguard.manifests import safe_load

    name = re.sub(r"[^a-z0-9.-]+", "-", f"codify-{key.kind}-{key.name}".lower()) + ".yaml"
    prel = krel.parent / name
    ops: list[Any] = []
    if (ws.root / prel).exists():
        try:
            loaded = safe_load(ws.text(prel))
        except yaml.YAMLError:
            return f"{prel} exists and is not a JSON 6902 patch"
        if not isinstance(loaded, list):
            return f"{prel} exists and is not a JSON 6902 patch"
        ops = loaded
    if old is not MISSING:
        op = {"op": "replace", "path": _ptr(parts), "value": expected_value(old, wanted)}
    else:
        k = len(parts)
        while k > 0 and get_at(obj, parts[:k]) is MISSING:
            k -= 1
        below = parts[k + 1 :]
        if any(p.isdigit() for p in below) or (isinstance(get_at(obj, parts[:k]), list) and below):
            return f"{_ptr(parts)}: the render has no list there to add an item to"
        value: Any = wanted
        for p in reversed(below):
            value = {p: value}
        op = {"op": "add", "path": _ptr(parts[: k + 1]), "value": value}
    ops = [o for o in ops if not (isinstance(o, dict) and o.get("path") == op["path"])] + [op]
    text = yaml.safe_dump(ops, default_flow_style=False, sort_keys=False, allow_unicode=True)
    header = f"# kept from a live change to {key} (driftguard-cmp codify)\n"
    edits: list[tuple[Path, Path_ | None, Any, int]] = [(prel, None, header + text, 0)]
    patches = kdoc.get("patches") if isinstance(kdoc.get("patches"), list) else None
    listed = any(isinstance(p, dict) and p.get("path") == name for p in patches or [])
    if not listed:
        target = {"group": key.group} if key.group else {}
        entry: dict[str, Any] = {"path": name, "target": {**target, "kind": key.kind, "name": key.name}}
        path: Path_ = ["patches", len(patches)] if patches is not None else ["patches"]
        edits.append((krel, path, entry if patches is not None else [entry], 0))
    return Edit(edits, f"add the JSON 6902 patch {prel} to the overlay's {krel.name}")


def _ptr(parts: list[str]) -> str:
    return "".join("/" + escape(p) for p in parts)


# --- plain manifests ------------------------------------------------------------------------


def _directory(
    ws: Workspace, before: Render, key: Any, obj: Any, parts: list[str], wanted: Any
) -> Iterator[Edit | str]:
    from cmp_plugin.repotools.codify_workspace import expected_value
    from driftguard.manifests import load_stream, resource_key

    source = before.sources.get(key, "")
    rel = _rel(ws, ws.app_dir / source)
    if rel is None or not (ws.root / rel).is_file() or rel.suffix == ".json":
        yield f"{source}: not a YAML file of this environment codify can edit"
        return
    try:
        docs = list(load_stream(ws.text(rel), source=str(rel)))
    except DriftguardError as exc:
        yield str(exc)
        return
    index = None
    for i, d in enumerate(docs):
        if resource_key(d.obj, default_namespace=ws.target.env.namespace) == key:
            index = i
    if index is None:
        yield f"{rel}: {key} is inside a List or generated; edit it by hand"
        return
    old = get_at(obj, parts)
    path: Path_ = []
    node: Any = docs[index].obj
    for p in parts:
        if isinstance(node, list) and p.isdigit():
            path.append(int(p))
            node = node[int(p)] if int(p) < len(node) else None
        else:
            path.append(p)
            node = node.get(p) if isinstance(node, dict) else None
    value = expected_value(old, wanted) if old is not MISSING else wanted
    yield Edit([(rel, path, value, index)], f"set {_ptr(parts)} in {rel}")

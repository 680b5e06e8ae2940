"""Set one value in a YAML file's text, touching nothing else (comments, order, quoting, indentation).

As ``set-image`` does (cmp_plugin/repotools/set_image.py): ruamel.yaml's round-trip loader says *where* each
node is, and only those characters are rewritten; a missing key is added as new lines under the
deepest block mapping that exists. Every edit is checked by loading the result: it must equal the
old document with exactly that value set, or nothing is returned.
"""

from __future__ import annotations

import copy
import io
import itertools
import json
import re
from typing import Any

from driftguard.errors import InputError

__all__ = ["Path_", "edit_yaml", "set_in"]

Path_ = list[str | int]

_PLAIN = re.compile(r"[A-Za-z0-9_][\w./@:+-]*( [\w./@:+-]+)*")


def set_in(doc: Any, path: Path_, value: Any) -> Any:
    """A copy of ``doc`` with ``value`` at ``path`` (missing maps created)."""
    out = copy.deepcopy(doc) if doc is not None else {}
    node = out
    for i, seg in enumerate(path):
        last = i == len(path) - 1
        if isinstance(seg, int):
            if not isinstance(node, list) or seg > len(node):
                raise InputError(f"cannot set item {seg} of {path[:i]}: not a list that long")
            if seg == len(node):
                node.append(None)
            if last:
                node[seg] = value
            else:
                if not isinstance(node[seg], dict | list):
                    node[seg] = {}
                node = node[seg]
            continue
        if not isinstance(node, dict):
            raise InputError(f"cannot set {seg!r} under {path[:i]}: not a mapping")
        if last:
            node[seg] = value
        else:
            if not isinstance(node.get(seg), dict | list):
                node[seg] = {}
            node = node[seg]
    return out


def scalar_text(value: Any, like: str = "") -> str:
    """``value`` as YAML, quoted the way the old value (``like``) was when it is a string."""
    from driftguard.manifests import safe_load

    if isinstance(value, str):
        if like.startswith("'") and "\n" not in value:
            return "'" + value.replace("'", "''") + "'"
        if like.startswith('"') or not _PLAIN.fullmatch(value) or _loads(safe_load, value) != value:
            return json.dumps(value, ensure_ascii=False)
        return value
    return json.dumps(value, ensure_ascii=False)


def _loads(load: Any, text: str) -> Any:
    try:
        return load(text)
    except Exception:
        return object()


def key_text(key: str | int) -> str:
    import yaml

    text: str = yaml.safe_dump(key, allow_unicode=True, width=10**6).strip()
    return text.removesuffix("...").strip()


def _block(path: Path_, value: Any, indent: int, step: int) -> list[str]:
    """Lines for ``k1: {k2: ... value}`` written as a block at ``indent``."""
    import yaml

    lines = []
    for depth, seg in enumerate(path[:-1]):
        lines.append(" " * (indent + depth * step) + key_text(seg) + ":")
    pad = " " * (indent + (len(path) - 1) * step)
    head = pad + key_text(path[-1]) + ":"
    if isinstance(value, dict | list) and value:
        body = yaml.safe_dump(
            value, default_flow_style=False, indent=step, allow_unicode=True, sort_keys=False
        )
        sub = " " * (len(pad) + step) if isinstance(value, dict) else pad
        lines.append(head)
        lines += [sub + line for line in body.splitlines()]
    else:
        lines.append(head + " " + scalar_text(value))
    return lines


def _step(text: str) -> int:
    """The file's indentation step: how far the line after a ``key:`` line is indented, 2 by default."""
    steps = []
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    for prev, line in itertools.pairwise(lines):
        if prev.rstrip().endswith(":"):
            step = (len(line) - len(line.lstrip(" "))) - (len(prev) - len(prev.lstrip(" -")))
            if step > 0:
                steps.append(step)
    return min(steps) if steps else 2


def _scalar_end(line: str, col: int) -> int:
    from cmp_plugin.repotools.set_image import _scalar_end as end

    return end(line, col)


def edit_yaml(text: str, path: Path_, value: Any, *, doc_index: int = 0, origin: str = "") -> str:
    """``text`` with ``value`` set at ``path`` of its ``doc_index``-th document, layout kept."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        docs = list(YAML(typ="rt").load_all(text))
        plain = _safe_all(text)
    except YAMLError as exc:
        raise InputError(f"{origin}: not valid YAML: {str(exc).splitlines()[0]}") from exc
    if doc_index >= len(docs):
        if text.strip() or doc_index:
            raise InputError(f"{origin}: has no document {doc_index}")
        docs, plain = [None], [None]
    expected = list(plain)
    expected[doc_index] = set_in(plain[doc_index], path, value)
    new = _surgery(text, docs[doc_index], path, value)
    if new is None or _loads_all(new) != expected:
        new = _redump(docs, doc_index, path, value)
    if _loads_all(new) != expected:
        raise InputError(
            f"{origin}: could not set {'.'.join(map(str, path))} without changing more; edit it by hand"
        )
    return new


def _loads_all(text: str) -> Any:
    import yaml

    try:
        return _safe_all(text)
    except yaml.YAMLError:
        return None


def _safe_all(text: str) -> list[Any]:
    import yaml

    from driftguard.manifests import _loader

    out = list(yaml.load_all(text, Loader=_loader()))
    return out if out else [None]


def _surgery(text: str, root: Any, path: Path_, value: Any) -> str | None:
    """Rewrite the old scalar in place, or add lines under the deepest block mapping on the path."""
    lines = text.splitlines(keepends=True)
    node = root
    for i, seg in enumerate(path):
        last = i == len(path) - 1
        container: Any = node  # ruamel's CommentedMap/CommentedSeq: .lc holds the positions
        if isinstance(container, dict) and seg in container:
            child = container[seg]
            if last and not isinstance(child, dict | list) and not isinstance(value, dict | list):
                row, col = _lc(container).value(seg)
                return _replace_at(
                    lines, row, col, value, key_row=_lc(container).key(seg)[0], flow=_flow(container)
                )
            if last or not isinstance(child, dict | list):
                if child is None or (isinstance(child, dict | list) and not child):
                    return _fill_empty(lines, container, seg, path[i + 1 :], value)
                return None
            node = child
            continue
        if isinstance(container, list) and isinstance(seg, int) and seg < len(container):
            child = container[seg]
            if last and not isinstance(child, dict | list) and not isinstance(value, dict | list):
                row, col = _lc(container).item(seg)
                return _replace_at(lines, row, col, value, key_row=row, flow=_flow(container))
            if last or not isinstance(child, dict | list):
                return None
            node = child
            continue
        if isinstance(container, dict) and not isinstance(seg, int):
            return _insert_under(lines, text, container, path[i:], value)
        return None
    return None


def _lc(node: Any) -> Any:
    """ruamel's line/column record of a loaded mapping or sequence."""
    return node.lc


def _flow(node: Any) -> bool:
    fa = getattr(node, "fa", None)
    return bool(fa is not None and fa.flow_style())


def _replace_at(
    lines: list[str], row: int, col: int, value: Any, *, key_row: int, flow: bool = False
) -> str | None:
    if row != key_row and row >= len(lines):
        return None
    line = lines[row].rstrip("\n")
    nl = lines[row][len(line) :]
    if col >= len(line) or line[col] in "|>{[&*!":
        return None  # a block scalar, flow collection, anchor or tag: left to the full re-dump
    end = _scalar_end(line, col)
    if flow and line[col] not in "'\"":  # a plain scalar in [a, b] / {k: v} ends at , ] }
        ends = [i for i in (line.find(c, col) for c in ",]}") if i >= 0]
        end = min([end, *ends])
        while end > col and line[end - 1] == " ":
            end -= 1
    lines[row] = line[:col] + scalar_text(value, line[col:end]) + line[end:] + nl
    return "".join(lines)


def _insert_under(lines: list[str], text: str, mapping: Any, rest: Path_, value: Any) -> str | None:
    if any(isinstance(s, int) for s in rest) or not mapping:
        return None
    if getattr(mapping, "fa", None) is not None and mapping.fa.flow_style():
        return None
    first = next(iter(mapping))
    row0, col = mapping.lc.key(first)
    end = row0
    for r in range(row0 + 1, len(lines)):
        stripped = lines[r].strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped in ("---", "...") or stripped.startswith("--- "):
            break
        indent = len(lines[r]) - len(lines[r].lstrip(" "))
        if indent < col or (indent == col and lines[r].lstrip(" ").startswith("- ") and col > 0):
            break
        end = r
    block = _block(rest, value, col, _step(text))
    if not lines[end].endswith("\n"):
        lines[end] += "\n"
    lines[end + 1 : end + 1] = [b + "\n" for b in block]
    return "".join(lines)


def _fill_empty(lines: list[str], mapping: Any, key: Any, rest: Path_, value: Any) -> str | None:
    """``key: {}`` / ``key: []`` / ``key:`` (null) becomes a block holding the new value."""
    if getattr(mapping, "fa", None) is not None and mapping.fa.flow_style():
        return None
    krow, kcol = mapping.lc.key(key)
    line = lines[krow].rstrip("\n")
    m = re.match(
        r"(\s*(?:-\s+)?"
        + re.escape(key_text(key))
        + r"\s*:)(\s*(?:\{\s*\}|\[\s*\]|~|null|Null|NULL)?)(\s*#.*)?$",
        line,
    )
    if m is None:
        return None
    if not rest:
        lines[krow] = m.group(1) + " " + scalar_text(value) + (m.group(3) or "") + "\n"
        if isinstance(value, dict | list) and value:
            return None
        return "".join(lines)
    step = 2
    lines[krow] = m.group(1) + (m.group(3) or "") + "\n"
    block = _block(rest, value, kcol + step, step)
    lines[krow + 1 : krow + 1] = [b + "\n" for b in block]
    return "".join(lines)


def _redump(docs: list[Any], index: int, path: Path_, value: Any) -> str:
    """The last resort: ruamel's round-trip dump (comments and order kept, spacing may move)."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 10**6
    yaml.indent(mapping=2, sequence=4, offset=2)
    node = docs[index]
    if node is None:
        docs[index] = node = {}
    for seg in path[:-1]:
        if isinstance(node, dict) and not isinstance(node.get(seg), dict | list):
            node[seg] = {}
        node = node[seg]
    node[path[-1]] = value
    buf = io.StringIO()
    yaml.dump_all(docs, buf)
    return buf.getvalue()

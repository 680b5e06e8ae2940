"""What the line scanner (scan.py) reads of a whole document without the parser: a CRD's scope.

A CustomResourceDefinition is read for group, names.kind and scope without parsing the (often
huge) document.
"""

from __future__ import annotations

import re

from cmp_plugin.scan_text import (
    _FIRST_CHILD,
    _NEXT_TOP,
    _scalar,
)

# --- a CustomResourceDefinition's scope, read without parsing the (often huge) document ----------
_SPEC_KEYS = ("group", "scope", "names")


def _crd_spec(text: str, top: dict[str, tuple[str, int]], end: int) -> tuple[str, str, str] | None:
    """(spec.group, spec.names.kind, spec.scope) of a plain block-style CRD; None when only a parser can say."""
    spec = top.get("spec")
    if spec is None:
        return "", "", ""
    if spec[0] and not spec[0].startswith("#"):
        return None  # flow style, an anchor, a tag: the parser decides
    start = spec[1] + 1
    nxt = _NEXT_TOP.search(text, start - 1, end)
    found = _block_keys(text, start, nxt.start() + 1 if nxt else end, _SPEC_KEYS)
    if found is None:
        return None
    values: dict[str, str] = {}
    for key in ("group", "scope"):
        if key in found:
            value = _scalar(found[key][0])
            if value is None:
                return None
            values[key] = value
    kind = ""
    if "names" in found:
        raw, names_start, names_end = found["names"]
        if raw and not raw.startswith("#"):
            return None
        names = _block_keys(text, names_start, names_end, ("kind",))
        if names is None:
            return None
        if "kind" in names:
            value = _scalar(names["kind"][0])
            if value is None:
                return None
            kind = value
    return values.get("group", ""), kind, values.get("scope", "")


_BLOCK_RX: dict[
    tuple[int, tuple[str, ...]], tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str] | None]
] = {}


def _block_keys(
    text: str, start: int, end: int, wanted: tuple[str, ...]
) -> dict[str, tuple[str, int, int]] | None:
    """``wanted`` keys of the block mapping in text[start:end]: key -> (raw value, block start, block end).

    The block's indentation is its first line's; every line at that indentation must be ``key:``,
    ``key: value`` or a ``- `` item of the key above (anything else, a line less indented, or a
    wanted key twice: None, the parser decides). Each key's own block runs to the next line at
    the mapping's indentation.
    """
    block = "\n" + text[start:end]
    first = _FIRST_CHILD.search(block, 1)
    if first is None:
        return {}
    n = len(first.group(1))
    rx = _BLOCK_RX.get((n, wanted))
    if rx is None:
        names = "|".join(re.escape(w) for w in wanted)
        at_n = re.compile(
            rf"\n {{{n}}}(?=[^ \r\n#])(?:({names}):([^\n]*)|(?:[A-Za-z0-9_./-]+:(?:[ \t]|\r?(?=\n|$))|-(?:[ \t]|\r?(?=\n|$)))|(.))"
        )
        child = re.compile(rf"\n {{{n}}}(?=[^ \r\n#])")
        out = re.compile(rf"\n {{1,{n - 1}}}(?=[^ \r\n#])") if n > 1 else None
        rx = _BLOCK_RX[n, wanted] = (at_n, child, out)
    at_n, child, out = rx
    if out is not None and out.search(block):
        return None
    found: dict[str, tuple[str, int, int]] = {}
    for m in at_n.finditer(block):
        if m.group(3) is not None:
            return None  # a line at the block's indentation that is no plain key nor item
        key = m.group(1)
        if key is None:
            continue
        rest = m.group(2)
        if rest and rest[0] not in " \t\r":
            return None  # "group:x" is no key line
        if key in found:
            return None
        nxt = child.search(block, m.end())
        own_end = nxt.start() if nxt else len(block)
        # offsets in text: block[i] is text[start + i - 1]
        found[key] = (rest.strip(" \t\r"), start + m.end(), start + own_end - 1)
    return found

"""What the scanner reads of each document besides its identity: where metadata is, whether it may be
a hook or hidden from Argo CD (may_decide_kept), and the identity read from a document's
top-level keys (_identity). Below scan.py; its private names stay private to the scanner.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from cmp_plugin.scan_text import (
    _FIRST_CHILD,
    _NEXT_TOP,
    _api_kind,
    _with_meta,
)


def _in_metadata(
    rx: re.Pattern[str],
    nl: str,
    n: int,
    indent: dict[int, int],
    meta_ranges: dict[int, tuple[int, int]],
    offsets: list[int],
) -> Iterable[tuple[int, re.Match[str]]]:
    """(document, match) for ``rx`` over the stream: one pass when most documents' metadata is
    ``n`` in, else a pass over each such document's metadata block only (an odd-line pattern for
    four spaces matches most lines of a CRD)."""
    mine = [i for i, k in indent.items() if k == n]
    if 2 * len(mine) < len(offsets):
        for i in mine:
            lo, hi = meta_ranges[i]
            for m in rx.finditer(nl, lo, hi + 1):  # +1: the block's last line ends there in nl
                yield i, m
        return
    i, last = 0, len(offsets) - 1
    for m in rx.finditer(nl):
        at = m.start()
        while i < last and offsets[i + 1] <= at:
            i += 1
        yield i, m


def _hook_or_escape(chunk: str) -> bool:
    """``_hook_or_items`` but for ``items`` (the List reader takes them): a hook annotation key, or
    an escape in a double-quoted scalar; tags and other line breaks are checked apart (``_hidden``)."""
    return "/hook" in chunk or ("\\" in chunk and '"' in chunk)


def may_decide_kept(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] may hold what decides if Argo CD keeps a resource: parse it then.

    A hook annotation key (``argocd.argoproj.io/hook``, ``helm.sh/hook``) always holds ``/hook``
    literally unless a double-quoted scalar spells it with escapes; a top-level ``items`` key
    (List flattening, null lists) is a column-0 ``items:`` line (a quoted or spaced one is an odd
    line the parser reads anyway). cmp_plugin/target.py decides from the parsed object.

    Two more ways to hide them from a line scanner are parsed too. go-yaml v2 (Argo CD's YAML:
    sigs.k8s.io/yaml over go.yaml.in/yaml/v2) ends a line at CR, NEL, LS and PS as at LF
    (yamlprivateh.go ``is_break``), so ``spec: {}<CR>items: []`` has a top-level ``items`` key;
    and it decodes a ``!!binary`` scalar to a string (decode.go ``scalar``), a mapping key too,
    so ``!!binary YXJnb2Nk...: PreSync`` is a hook annotation: every document with a tag is parsed.
    """
    return _hook_or_items(text, start, end) or _hidden(text, start, end)


def _hook_or_items(text: str, start: int, end: int) -> bool:
    """A hook key, an ``items:`` line or an escape in text[start:end] (``may_decide_kept``)."""
    if text.find("/hook", start, end) >= 0 or text.find("\nitems:", start, end) >= 0:
        return True
    if text.startswith("items:", start):
        return True
    return text.find("\\", start, end) >= 0 and text.find('"', start, end) >= 0


_HIDING = "!\r\x85\u2028\u2029"
"""Characters ``_hidden`` looks for: a stream without any skips it for every document."""


def _hidden(text: str, start: int, end: int) -> bool:
    """A tag or a line break other than LF in text[start:end] (``may_decide_kept``)."""
    # str.find first (memchr): a regular expression tried at every offset of every document cost
    # more than the whole helm tier
    bang = text.find("!", start, end)
    if bang >= 0 and (bang == start or _TAG.search(text, bang - 1, end)):
        return True
    if any(text.find(c, start, end) >= 0 for c in "\x85\u2028\u2029"):
        return True
    cr = text.find("\r", start, end)
    return cr >= 0 and _LONE_CR.search(text, cr, end) is not None


# a line break go-yaml reads and the line scanner does not (besides NEL, LS, PS): CR not before LF
_LONE_CR = re.compile(r"\r(?!\n)")
# a tag's "!" (or one in text: only a parse then) after a blank, a break or a flow indicator
_TAG = re.compile(r"[ \t\r\n\[{,]!")


_EMPTY: Any = object()
_by_indent: dict[int, tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str] | None]] = {}


def _patterns(n: int) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str] | None]:
    """(identity keys, odd lines at metadata's level, outdented lines) for child indent ``n``."""
    found = _by_indent.get(n)
    if found is None:
        keys = re.compile(rf"^ {{{n}}}(name|namespace|generateName):([^\n]*)", re.M)
        # a "- item" at metadata's indentation is the compact sequence of the key above it
        odd = re.compile(
            rf"^ {{{n}}}(?=[^ \r\n#])(?!-(?:[ \t]|\r?$))(?![A-Za-z0-9_.-]+:(?:[ \t]|\r?$))", re.M
        )
        out = re.compile(rf"^ {{1,{n - 1}}}(?=[^ \r\n#])", re.M) if n > 1 else None
        found = _by_indent[n] = (keys, odd, out)
    return found


_CHILDREN: dict[int, tuple[re.Pattern[str], re.Pattern[str]]] = {}


def _children(n: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(identity keys n spaces in, odd lines) for metadata whose children are n spaces in: a line
    less indented, or one at n that is not ``key:`` nor ``- item``, and the parser decides."""
    found = _CHILDREN.get(n)
    if found is None:
        found = _CHILDREN[n] = (
            re.compile(rf"\n {{{n}}}(name|namespace|generateName):([^\n]*)"),
            re.compile(
                rf"\n(?: {{1,{n - 1}}}(?=[^ \r\n#])| {{{n}}}(?=[^ \r\n#])(?!-(?:[ \t]|\r?\n|\r?$))"
                r"(?![A-Za-z0-9_.-]+:(?:[ \t]|\r?\n|\r?$)))"
            )
            if n > 1
            else re.compile(
                r"\n (?=[^ \r\n#])(?!-(?:[ \t]|\r?\n|\r?$))(?![A-Za-z0-9_.-]+:(?:[ \t]|\r?\n|\r?$))"
            ),
        )
    return found


def _identity(text: str, top: dict[str, tuple[str, int]], end: int) -> Any:
    """(apiVersion, kind, name, namespace) from a plain block document; _EMPTY; or None (parse it)."""
    if not top:
        return _EMPTY
    meta_top = top.get("metadata")
    head = _api_kind(meta_top, top)
    if meta_top is None or head is None:
        return None
    start = meta_top[1] + 1
    nxt = _NEXT_TOP.search(text, start - 1, end)
    block = text[start : nxt.start() + 1 if nxt else end]
    first_child = _FIRST_CHILD.search(block)
    if first_child is None:
        return None
    keys, odd, outdented = _patterns(len(first_child.group(1)))
    if odd.search(block) or (outdented is not None and outdented.search(block)):
        return None  # "- item", flow, complex keys or outdented lines in metadata: let the parser decide
    pairs = [(k, v.strip(" \t\r")) for k, v in keys.findall(block) if not v or v[0] in " \t\r"]
    return _with_meta(*head, pairs)

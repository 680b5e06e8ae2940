"""Documents the line scanner (scan.py) reads whole: a CRD's scope from its spec, flow style and JSON.

A CustomResourceDefinition is read for group, names.kind and scope without parsing the (often
huge) document; a document in flow style or JSON is read by its own linear patterns, and anything
unsure goes to the parser.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Any, cast

from cmp_plugin.scan_text import (
    _AFTER_END,
    _DOC_END,
    _FIRST_CHILD,
    _NEXT_TOP,
    _PLAIN_WORD,
    _YAML_WORDS,
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


# --- documents in flow style or JSON ------------------------------------------------------------
# the document's marker line and the comment or blank lines before its "{"
_FLOW_HEAD = re.compile(r"(?:---[ \t]*+(?:#[^\n]*+)?\r?\n)?(?:[ \t]*+(?:#[^\n]*+)?\r?\n)*+[ \t]*+(?=\{)")
# a quoted scalar is read where a flow token starts (after "{", "[" or "," and blanks, or ": "); a
# quote anywhere else is inside a plain scalar, or the start of one the parser must read
_QUOTE_CHAR = re.compile(r"[\"']")
_FLOW_DQ = re.compile(r'"([^"\\\n]*+)"')
_FLOW_SQ = re.compile(r"'([^'\"\\\n]*+)'")
_JSON: Any = None
_JSON_LAX: Any = None
# outside quoted scalars: what only the parser reads (comments, anchors, aliases, tags, complex
# keys, merges, block scalars, reserved indicators, tabs, quotes inside plain scalars, and a BOM:
# go-yaml skips one at a line's start before any token, scannerc.go yaml_parser_scan_to_next_token)
_FLOW_UNSURE = re.compile(r"[#&*!?|>%@`<\\\t'\"\ufeff]")
# ... and a ":" after a blank or a line break, before a non-blank: in a plain scalar
# (``namespace :x``) it is text, go-yaml's yaml_parser_scan_plain_scalar ends a scalar at ":"
# only before a blank (looked for where " :" or a line break before ":" is in the text at all)
_SPACED_COLON = re.compile(r"[ \r\n]:(?![ \t\r\n]|\Z)")


def _unsure(text: str) -> bool:
    """Whether ``text`` (a flow body outside its quoted scalars) holds what only the parser reads."""
    if _FLOW_UNSURE.search(text):
        return True
    return (" :" in text or "\n:" in text or "\r:" in text) and _SPACED_COLON.search(text) is not None


# a plain scalar in a flow collection: words joined by blanks, or by ":" not followed by a blank or
# a flow indicator (registry.example.com/app:1.0); it ends at a flow indicator, ": " or a line end
_FLOW_PLAIN = re.compile(r"([^\s{}\[\],:](?:[^\s{}\[\],:]++|:(?=[^\s{}\[\],])|[ ]++(?=[^\s{}\[\],:]))*+)")
_QUOTED_MARK = "\x01"


def _flow_identity(chunk: str) -> Any:
    """(apiVersion, kind, name, namespace, named) of a document that is one flow mapping (JSON
    included); None when only the parser can say (or it is no such document).

    JSON is read by ``json.loads``. Other flow YAML becomes JSON first: each plain scalar quoted,
    each quoted scalar kept (single quotes turned double) with a mark; a plain value of an
    identity field must then be a string for go-yaml (``_scalar``). Anything else (comments,
    anchors, tags, escapes, multi-line scalars, ``items``, a CRD) is the parser's.

    The reference for ``_flow_identities``, which reads many documents at once.
    """
    body = _flow_body(chunk)
    if body is None:
        return None
    _decoders()
    try:
        if not _json_first(body):
            raise ValueError("no JSON")  # a plain key first: flow YAML, not JSON
        obj = _JSON.decode(body)
        plain = False
    except ValueError:
        split = _flow_quoted(body)
        if split is None:
            return None
        outside, quoted = split
        # every plain scalar quoted (split out, joined by quotes)
        parts = ['"'.join(_FLOW_PLAIN.split(p)) for p in outside]
        for i, scalar in enumerate(quoted):
            parts.insert(2 * i + 1, scalar)
        try:
            obj = _JSON_LAX.decode("".join(parts))
        except (ValueError, RecursionError):  # too deep: the parser's limit words the refusal
            return None
        plain = True
    except RecursionError:
        return None
    return _flow_read(obj, plain)


def _flow_identities(chunks: list[str]) -> list[Any]:
    """``[_flow_identity(c) for c in chunks]``, in a few passes over all of them at once.

    A big render in flow style is thousands of such documents; quoting each one's plain scalars
    with a regular expression (~0.3 us a scalar) was most of its scan. Here the text between the
    quoted scalars of every document is quoted in one go (``_quote_plain``), each document then
    decoded as JSON; a document the fast quoting cannot be sure of goes through
    ``_flow_identity`` whole.
    """
    out: list[Any] = [None] * len(chunks)
    todo: list[tuple[int, list[str], list[str]]] = []
    _decoders()
    strict = _JSON.scan_once
    for i, chunk in enumerate(chunks):
        body = _flow_body(chunk)
        if body is not None and _json_first(body):
            try:  # JSONDecoder.decode without its Python layers (the body starts with "{")
                obj, end = strict(body, 0)
                if body[end:].strip(" \t\n\r"):
                    raise ValueError("extra data")
            except (ValueError, StopIteration):
                out[i] = _flow_identity(chunk)  # flow YAML after all: the reference reads it
            except RecursionError:
                pass  # None, as _flow_identity answers
            else:
                out[i] = _flow_read(obj, False)
            continue
        split = None if body is None else _flow_quoted(body)
        if split is None:
            out[i] = _flow_identity(chunk)  # an answer the reference words
        else:
            todo.append((i, *split))
    if not todo:
        return out
    parts = [p for _, outside, _ in todo for p in outside]
    plain = _quote_plain(parts)
    scan = _JSON_LAX.scan_once
    at = 0
    for i, outside, quoted in todo:
        if quoted:
            n = len(outside)
            mine = plain[at : at + n]
            at += n
            if None in mine:
                out[i] = _flow_identity(chunks[i])
                continue
            pieces = cast("list[str]", mine)
            text = "".join([x for k, scalar in enumerate(quoted) for x in (pieces[k], scalar)] + [pieces[-1]])
            # a mark in a key: a quoted scalar a ":" follows (a key in JSON), or one in plain text
            marked = any(_KEYED.match(pieces[k + 1]) for k in range(len(quoted))) or any(
                _QUOTED_MARK in x for x in pieces
            )
        else:  # one part: the whole body
            one = plain[at]
            at += 1
            if one is None:
                out[i] = _flow_identity(chunks[i])
                continue
            text = one
            marked = _QUOTED_MARK in one
        try:
            obj, end = scan(text, 0)  # what JSONDecoder.decode does, without its Python layers
            if text[end:].strip(" \t\n\r"):
                raise ValueError("extra data")
        except (ValueError, StopIteration, RecursionError):
            out[i] = _flow_identity(chunks[i])  # "a b": one plain scalar the fast quoting split
            continue
        out[i] = _flow_read(obj, True, marked)
    return out


# the fast quoting (``_quote_plain``) takes as plain scalars the runs between blanks, line breaks,
# flow indicators and ":" before one of them or the end: the runs _FLOW_PLAIN finds, but for
# "a b" (one scalar; quoted as two, which no JSON decodes), a ":" that starts a run (":a"), a ":"
# before a flow indicator, and blanks other than " ", "\n", "\r" (Unicode's): those are not
# quoted fast
_KEYED = re.compile(r"[ \t\n\r]*+:")
_COLON_ON = re.compile(r":(?![\s\x00]|\Z)")
_OTHER_BLANKS = re.compile(r"[^\S \n\r]")
_NOT_AFTER = frozenset(" \n\r{}[],\x00")


def _quote_plain(parts: list[str]) -> list[str | None]:
    """``'"'.join(_FLOW_PLAIN.split(p))`` for each of ``parts`` where it is sure to be that, else None.

    Every blank, line break and flow indicator ``d`` becomes ``"d"``, so each run between them is
    quoted, with ``""`` around each empty one; a run's last ":" (a mapping's ":" before a blank or
    an indicator) is moved out of its quotes, the empty quotes dropped. The parts are joined by
    NUL, itself wrapped like an indicator, so each pass (a ``str.replace``, in C) runs once over
    all of them: no match per scalar.
    """
    joined = "\x00".join(parts)
    if joined.count("\x00") != len(parts) - 1:
        return [None] * len(parts)
    starts = []
    at = 0
    for p in parts:
        starts.append(at)
        at += len(p) + 1
    bad: set[int] = set()
    for m in _COLON_ON.finditer(joined):
        at = m.start()
        if joined[at + 1] in "{}[]," or at == 0 or joined[at - 1] in _NOT_AFTER:
            bad.add(bisect_right(starts, at) - 1)
    if not joined.isascii() or any(c in joined for c in "\t\x0b\x0c\x1c\x1d\x1e\x1f"):
        bad |= {bisect_right(starts, m.start()) - 1 for m in _OTHER_BLANKS.finditer(joined)}
    q = joined
    for d in " \n\r{}[],\x00":
        q = q.replace(d, f'"{d}"')
    out: list[str | None] = list(('"' + q + '"').replace(':"', '":').replace('""', "").split("\x00"))
    for i in bad:
        out[i] = None
    return out


def _decoders() -> None:
    global _JSON, _JSON_LAX
    if _JSON is None or _JSON_LAX is None:
        import json

        _JSON, _JSON_LAX = json.JSONDecoder(), json.JSONDecoder(strict=False)


def _flow_body(chunk: str) -> str | None:
    """The flow mapping of a document: after its marker and comment lines, before a ``...``."""
    head = _FLOW_HEAD.match(chunk)
    if head is None:
        return None
    body = chunk[head.end() :]
    end = _DOC_END.search(body)
    if end is not None:
        if _AFTER_END.fullmatch(body, end.start() + 1) is None:
            return None
        body = body[: end.start() + 1]
    return body


def _json_first(body: str) -> bool:
    """Whether the mapping's first key is quoted (or it is empty): JSON is tried first."""
    return _JSON_FIRST.match(body) is not None


# after the body's first character ("{", _FLOW_HEAD), its first token: a quoted key or the end
_JSON_FIRST = re.compile(r"(?s:.)[ \t\r\n]*+[\"}]")


def _flow_quoted(body: str) -> tuple[list[str], list[str]] | None:
    """The text between quoted scalars, and each quoted scalar as a marked JSON string; None when
    a quote or anything outside them is the parser's."""
    odd = _FLOW_UNSURE.search(body)  # quotes are among its characters
    if odd is None:  # no quoted scalar, nothing unsure: the body is all outside
        return None if _unsure(body) else ([body], [])
    at = _QUOTE_CHAR.search(body, odd.start())
    outside, quoted = [], []  # every quoted scalar marked, the text between them apart
    pos = 0
    while at is not None:
        start = at.start()
        before = body[pos:start].rstrip(" \r\n")
        if not (before[-1:] in ("{", "[", ",") or (before[-1:] == ":" and len(before) < start - pos)):
            return None  # a quote inside a plain scalar, or after a quoted key ('"a":"b"')
        q = (_FLOW_DQ if body[start] == '"' else _FLOW_SQ).match(body, start)
        if q is None:
            return None  # an escape, a line break or the other quote inside: the parser's
        outside.append(body[pos:start])
        quoted.append(f'"{_QUOTED_MARK}{q.group(1)}"')
        pos = q.end()
        at = _QUOTE_CHAR.search(body, pos)
    outside.append(body[pos:])
    if _unsure("".join(outside)):
        return None
    return outside, quoted


def _flow_read(obj: Any, plain: bool, marked: bool = True) -> Any:
    """The identity in a flow mapping read as JSON (``_flow_identity``'s answer); ``marked``: False
    when no key can hold a quoted scalar's mark (the text has none), so none is renamed."""
    if type(obj) is not dict:
        return None
    if plain and not marked:  # the common case, without the calls: as below
        meta = obj.get("metadata")
        if "items" in obj or type(meta) is not dict:
            return None
        found = []
        get = meta.get
        for value in (
            obj.get("apiVersion"),
            obj.get("kind"),
            get("name"),
            get("generateName"),
            get("namespace"),
        ):
            if value is not None:
                if type(value) is not str:
                    return None
                if value[:1] == _QUOTED_MARK:
                    value = value[1:]
                elif (
                    not (_PLAIN_WORD.fullmatch(value) and value not in _YAML_WORDS)
                    and _scalar(value) != value
                ):
                    return None
            found.append(value)
        api, kind, name, generate, namespace = found
        if not api or not kind or not (name or generate) or kind == "CustomResourceDefinition":
            return None
        return api, kind, name or generate, namespace or "", bool(name)
    top = _flow_keys(obj, plain and marked)
    if top is None or "items" in top:
        return None
    meta = _flow_keys(top.get("metadata"), plain and marked)
    if meta is None:
        return None
    found = []
    get = meta.get
    for value in (top.get("apiVersion"), top.get("kind"), get("name"), get("generateName"), get("namespace")):
        if value is not None:
            value = _flow_string(value, plain)
            if value is None:
                return None
        found.append(value)
    api, kind, name, generate, namespace = found
    if not api or not kind or not (name or generate) or kind == "CustomResourceDefinition":
        return None  # an error for the parser to word, or a CRD whose scope it reads
    return api, kind, name or generate, namespace or "", bool(name)


def _flow_keys(obj: Any, plain: bool) -> dict[str, Any] | None:
    """A mapping with its keys as YAML spells them (marks removed); None when two keys are one."""
    if type(obj) is not dict:
        return None
    if not plain:
        return obj
    out = {k[1:] if k[:1] == _QUOTED_MARK else k: v for k, v in obj.items()}
    return out if len(out) == len(obj) else None


def _flow_string(value: Any, plain: bool) -> str | None:
    """The string an identity field holds; None when it is no string (or only the parser can say)."""
    if type(value) is not str:
        return None
    if not plain:
        return value
    if value[:1] == _QUOTED_MARK:
        return value[1:]
    if _PLAIN_WORD.fullmatch(value) and value not in _YAML_WORDS:
        return value  # _scalar's common case, without the call
    return value if _scalar(value) == value else None

"""Where a scalar spans lines, for the line scanner (scan.py): quoted, flow and block scalars.

Every pattern here is linear (possessive or anchored). The names stay private to the scanner.
"""

from __future__ import annotations

import re
from bisect import bisect_right

# --- multi-line quoted and flow scalars ---------------------------------------------------------
# A quoted scalar (or a flow collection) may go on over several lines, and its continuation lines
# may look like keys at any indentation. Every line where one starts is looked at.
# a line whose value, sequence item or key starts with a quote, a flow bracket, an anchor or a tag
# (possessive where it repeats: one pass over each line, linear)
_QUOTE_LINE = re.compile(r"\n *+(?:- ++)*+(?:(?:[^\n#'\":]*+:(?![ \t]))*+[^\n#'\":]*+:[ \t]++)?[\"'{\[&!]")
_KEY_HEAD = re.compile(r"[A-Za-z0-9_./-]+:(?:[ \t]+|$)")
_DQ = re.compile(r'"(?:[^"\\\n]|\\.)*+"')  # possessive: a quote never ends early
_SQ = re.compile(r"'(?:[^'\n]|'')*+'")  # possessive: 'it''s' stays one scalar
_AFTER = re.compile(r"[ \t]*(?:#.*)?\r?")


def _multiline_flow_scalars(
    nl: str, *, skip: tuple[list[int], list[int], set[int]] | None = None
) -> list[int]:
    """Offsets (in ``nl``) of lines starting a quoted scalar or flow collection that could mislead the scanner.

    One that ends on its line is harmless, and so is one whose every further line is indented
    deeper than the line it starts on (what helm and controller-gen print): the scanner only ever
    reads lines at the indentation of a block's own keys, and those lines are deeper than any key
    of that block. Lines inside a block scalar (``key: |``) are text, not YAML: skipped. With
    ``skip`` (each document's start and end offset in the stream, and the documents already left
    to the parser), lines of those documents are not looked at.
    """
    found = []
    pos = 0
    blocks: list[tuple[int, int]] | None = None
    spans: list[tuple[int, int]] | None = None
    if skip is not None and skip[2]:  # the documents not left to the parser, as runs of lines
        spans = []
        for i, (lo, hi) in enumerate(zip(skip[0], skip[1], strict=True)):
            if i not in skip[2]:
                if spans and spans[-1][1] == lo:
                    spans[-1] = (spans[-1][0], hi)
                else:
                    spans.append((lo, hi))
    for m in _quote_lines(nl, spans):
        start = m.start() + 1
        if start < pos:
            continue
        end = nl.find("\n", start)
        end = len(nl) if end < 0 else end
        pos = end
        line = nl[start:end]
        opener = _unclosed(line)
        if opener < 0:
            continue
        if blocks is None:
            blocks = _block_scalars(nl)
        i = bisect_right(blocks, (m.start(), len(nl))) - 1
        inside = i >= 0 and blocks[i][0] <= m.start() < blocks[i][1]
        if inside:
            continue
        close = _scalar_end(nl, start + opener) if opener < len(line) else -1
        indent = len(line) - len(line.lstrip(" "))
        if close < 0 or _shallow_line(indent).search(nl, end, close):
            found.append(m.start())
        pos = max(pos, close)
    return found


_QUOTE_CHARS = "\"'{[&!"


def _quote_lines(nl: str, spans: list[tuple[int, int]] | None = None) -> list[re.Match[str]]:
    """``_QUOTE_LINE.finditer(nl)``, faster: only lines holding one of its characters are tried,
    and of those not the closed ones (``_CLOSED_LINE``), which ``_unclosed`` would pass anyway.

    A match never leaves its line and ends on the first such character, so trying each line that
    holds one gives the same matches in the same order. One regular expression (``_SIMPLE_LINES``)
    steps over every run of lines without such a character or closed, in C; Python looks only at
    the lines it stops on (a List of 3,200 items has ~13,000 closed ``{app: web}`` lines: ~1 us
    each in Python). With ``spans`` ([start, end) offsets of whole lines in ``nl``), only lines
    inside them are looked at. ``_quote_lines_each`` is the reference.
    """
    out = []
    simple = _SIMPLE_LINES.match
    for lo, hi in spans if spans is not None else ((0, len(nl)),):
        # the span's last line ends at hi, or (the stream's last line, no newline) at its end
        stop = hi if hi >= len(nl) or nl[hi] == "\n" else len(nl)
        pos = lo
        while True:
            run = simple(nl, pos, stop)  # always matches, maybe no line
            at = run.end() if run is not None else pos
            if at >= hi:
                break
            end = nl.find("\n", at + 1)
            end = len(nl) if end < 0 else end
            lim = min(end, hi)
            if any(nl.find(c, at, lim) >= 0 for c in _QUOTE_CHARS):
                m = _QUOTE_LINE.match(nl, at)
                if m is not None:
                    out.append(m)
            if end >= hi:
                break
            pos = end
    return out


def _quote_lines_each(nl: str, spans: list[tuple[int, int]] | None = None) -> list[re.Match[str]]:
    """``_quote_lines`` line by line: each line holding one of its characters found by ``str.find``."""
    lines = set()
    for lo, hi in spans if spans is not None else ((0, len(nl)),):
        for c in _QUOTE_CHARS:
            at = nl.find(c, lo, hi)
            while at >= 0:
                start = nl.rfind("\n", 0, at)
                lines.add(start)
                end = nl.find("\n", at, hi)
                if end < 0:
                    break
                at = nl.find(c, end, hi)
    out = []
    closed = _CLOSED_LINE.match
    for start in sorted(lines):
        if start >= 0 and closed(nl, start) is None:
            m = _QUOTE_LINE.match(nl, start)
            if m is not None:
                out.append(m)
    return out


# a line whose one value is a flow collection (three levels deep at most, no quotes nor comments in
# it) or a quoted scalar without escapes, closed on the line and nothing after it: ``_unclosed``
# finds nothing there, so it is not asked (``labels: {app: web}``, ``ports: [{port: 80}]``)
_F0 = r"[^{}\[\]\n\"'#]"
_F1 = rf"\{{{_F0}*+\}}|\[{_F0}*+\]"
# (runs of _F0 taken whole: one character-set loop, not an alternation per character)
_F2 = rf"\{{(?:{_F0}++|{_F1})*+\}}|\[(?:{_F0}++|{_F1})*+\]"
_F3 = rf"\{{(?:{_F0}++|{_F2})*+\}}|\[(?:{_F0}++|{_F2})*+\]"
_CLOSED_LINE = re.compile(
    rf"\n *+(?:- ++)*+(?:[A-Za-z0-9_./-]++:[ \t]++)?(?:{_F3}|\"[^\"\\\n]*+\"|'[^'\n]*+')[ \t]*+\r?+(?=\n|$)"
)
# a run of lines each without a quote, bracket, anchor or tag character, or closed (_CLOSED_LINE)
_SIMPLE_LINES = re.compile(rf"(?:\n[^\n\"'{{\[&!]*+(?=\n|$)|{_CLOSED_LINE.pattern})*+")


_SHALLOW: dict[int, re.Pattern[str]] = {}


def _shallow_line(indent: int) -> re.Pattern[str]:
    """A non-blank line indented ``indent`` or less."""
    rx = _SHALLOW.get(indent)
    if rx is None:
        rx = _SHALLOW[indent] = re.compile(rf"\n {{0,{indent}}}(?=[^ \r\n])")
    return rx


_DQ_ANY = re.compile(r'"(?:[^"\\]|\\.)*+"', re.S)
_SQ_ANY = re.compile(r"'(?:[^']|'')*+'")


def _scalar_end(nl: str, at: int) -> int:
    """The offset just after the quoted scalar or flow collection starting at ``at``; -1 when it never ends."""
    c = nl[at]
    if c in "\"'":
        q = (_DQ_ANY if c == '"' else _SQ_ANY).match(nl, at)
        return q.end() if q else -1
    depth, i, n = 0, at, len(nl)
    while i < n:
        c = nl[i]
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        elif c in "\"'":
            q = (_DQ_ANY if c == '"' else _SQ_ANY).match(nl, i)
            if q is None:
                return -1
            i = q.end()
            continue
        elif c == "#" and nl[i - 1] in " \t\n":
            j = nl.find("\n", i)
            if j < 0:
                return -1
            i = j
            continue
        i += 1
    return -1


# a line whose value (after a key or "- ") is a block scalar header: | or > with indicators
_BLOCK_HEADER = re.compile(
    r"\n( *+)(?:- ++)*+(?:[A-Za-z0-9_./-]++:[ \t]++)?[|>][-+1-9]{0,2}+[ \t]*+(?:#[^\n]*+)?\r?(?=\n)"
)


# where one may end a line: found first (a fast scan for two characters), the line then checked
_BLOCK_INDICATOR = re.compile(r"[|>][-+1-9]{0,2}+[ \t]*+(?:#[^\n]*+)?\r?(?=\n)")


def _block_indicators(nl: str) -> list[re.Match[str]]:
    """``_BLOCK_INDICATOR.finditer(nl)``, faster: tried only where ``str.find`` finds a ``|`` or ``>``.

    A match starts on one of them and ends before a newline, so matches never overlap a later
    candidate on another line; on the same line the first candidate's match (if any) is kept and
    candidates inside it are skipped, as finditer does.
    """
    hits = []
    for c in "|>":
        at = nl.find(c)
        while at >= 0:
            hits.append(at)
            at = nl.find(c, at + 1)
    hits.sort()
    out: list[re.Match[str]] = []
    for at in hits:
        if out and at < out[-1].end():
            continue
        m = _BLOCK_INDICATOR.match(nl, at)
        if m is not None:
            out.append(m)
    return out


def _block_scalars(nl: str) -> list[tuple[int, int]]:
    """[start, end) offsets in ``nl`` of the content lines of every block scalar, in order."""
    out = []
    pos = 0
    for hit in _block_indicators(nl):
        if hit.start() < pos:
            continue  # inside the previous block scalar
        m = _BLOCK_HEADER.match(nl, nl.rfind("\n", 0, hit.start()))
        if m is None or m.end() != hit.end():
            continue
        stop = _shallow_line(len(m.group(1))).search(nl, m.end())
        pos = stop.start() if stop else len(nl)
        out.append((m.end(), pos))
    return out


def _unclosed(line: str) -> int:
    """-1 when every quoted scalar / flow collection a value or item of ``line`` starts ends on it; else
    the index of the one that does not (``len(line)`` when the line is odd in another way)."""
    s = line.lstrip(" ")
    while s[:2] == "- ":
        s = s[2:].lstrip(" ")
    for _ in range(2):  # a key (plain or quoted), then its value
        k = _KEY_HEAD.match(s)
        if k is not None:
            s = s[k.end() :]
            continue
        c = s[:1]
        at = len(line) - len(s)
        if c in ('"', "'"):
            q = (_DQ if c == '"' else _SQ).match(s)
            if q is None:
                return at
            rest = s[q.end() :]
            if rest[:1] == ":":  # a quoted key: its value follows
                s = rest[1:].lstrip(" \t")
                continue
            # more after a closed quote: valid YAML only as the continuation of a plain scalar
            # (text, indented deeper than its block's keys), else the parser refuses it anyway
            return -1
        if c in ("{", "["):
            return -1 if _flow_closes(s) else at
        if c in ("&", "!") and any(ch in s for ch in "\"'{["):
            return len(line)  # an anchor or a tag before a quote: unsure
        return -1
    return -1


def _flow_closes(s: str) -> bool:
    """Whether the flow collection at the start of ``s`` closes on this line (quotes respected)."""
    depth, i, n = 0, 0, len(s)
    while i < n:
        c = s[i]
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return True  # anything after it: as after a closed quote
        elif c in "\"'":
            q = (_DQ if c == '"' else _SQ).match(s, i)
            if q is None:
                return False
            i = q.end()
            continue
        elif c == "#" and i and s[i - 1] in " \t":
            return False
        i += 1
    return False

"""Strings from the repository or the PR, made safe to put in a Markdown PR comment (and in text).

Every Application name, path, resource name, cause and value the diff prints comes from the PR.
In a comment a newline there could start a block of its own (``<!--`` at the start of a line opens
an HTML comment that hides the rest, a ``|`` row ends a table), a backtick could open a code span
that swallows the next line, ``*``/``_``/``[`` could take over the comment's own emphasis and
links, ``@name`` pings people, and ``$...$`` renders as math on GitHub. So:

- ``oneline``: no line breaks or other control characters, ever (CommonMark's line endings are
  LF, CR and CRLF; Unicode's NEL, LS and PS and the C0/C1 controls go too): each is written as a
  visible escape (``\\n``), so a reviewer sees that the name holds one. Used for text output too
  (a terminal must not be told to move its cursor).
- ``text``: inline text with every character that opens inline syntax in CommonMark or GitHub's
  extensions backslash-escaped (CommonMark 0.31 §2.4: any ASCII punctuation may be escaped), and
  ``<``, ``>``, ``&`` as entities (no HTML, no entity tricks). Never at the start of a line (the
  comment's own prefix always comes first), so block markers (``-``, ``+``, ``=``) need nothing.
  Safe in a table cell too (``|`` escaped, GFM §4.10).
- ``code``: a code span whose fence is longer than any run of backticks inside (CommonMark §6.1),
  padded when the content starts or ends with a backtick or a space; in a table cell its pipes
  are escaped.
"""

from __future__ import annotations

import re

__all__ = ["code", "oneline", "text"]

# C0 and C1 controls, DEL, and Unicode's line and paragraph separators
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# inline syntax of CommonMark and GitHub's extensions (tables, strikethrough, autolinks, mentions, math)
_PUNCT = re.compile(r"([\\`*_\[\]#!|~$@])")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def oneline(value: object) -> str:
    """``value`` on one line: each control character written as a visible escape."""
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(0), f"\\x{ord(m.group(0)):02x}"), str(value))


def text(value: object) -> str:
    """Inline Markdown that renders as exactly ``oneline(value)``."""
    escaped = "".join(_ENTITIES.get(ch, ch) for ch in _PUNCT.sub(r"\\\1", oneline(value)))
    # a paragraph's or heading's first and last whitespace is stripped before inline parsing: as
    # numeric references, a name's own leading and trailing blanks stay visible
    core = escaped.strip()
    if not core:
        return "".join(f"&#{ord(ch)};" for ch in escaped)
    start = escaped.index(core[0])
    lead, tail = escaped[:start], escaped[start + len(core) :]
    return "".join(f"&#{ord(ch)};" for ch in lead) + core + "".join(f"&#{ord(ch)};" for ch in tail)


def code(value: object, *, cell: bool = False) -> str:
    """A code span that renders as exactly ``oneline(value)`` (``""`` for an empty string).

    ``cell``: inside a table row, where GFM splits cells before anything else and reads ``\\|`` as a
    pipe of the cell's content, inside code spans too (GFM spec, tables; cmark-gfm and markdown-it
    both take a backslash right before a pipe as its escape, however many backslashes come before).
    """
    body = oneline(value)
    if not body:
        return '""'
    runs = [len(r) for r in re.findall(r"`+", body)]
    fence = "`" * (max(runs, default=0) + 1)
    if body.strip(" ") and (body[0] in "` " or body[-1] in "` "):
        body = f" {body} "
    if cell:
        body = body.replace("|", "\\|")
    return f"{fence}{body}{fence}"

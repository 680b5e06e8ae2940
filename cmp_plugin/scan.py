"""Read the identity of every document in a rendered stream, fast.

The guards need each document's apiVersion, kind, name and namespace, not an object model, and
the plugin passes the render through unchanged. So a line scanner reads the identity of plain
block-style documents (what helm and kustomize print) in one pass, and every document it cannot
read with certainty (flow style, anchors, tags, block scalars, quoting with escapes, ``*List``
kinds, CRDs, anything odd) goes through the full safe YAML parser instead. Argo CD parses the
stream itself afterwards, so invalid YAML still fails there rather than being synced.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from driftguard.errors import LimitExceeded
from driftguard.manifests import (
    CLUSTER_SCOPED,
    DEFAULT_LIMITS,
    Limits,
    ResourceKey,
    cluster_scoped_kinds,
    group_of,
    load_stream,
    resource_key,
    split_documents,
)

__all__ = ["Doc", "scan_stream"]

_TOP_KEY = re.compile(r"([A-Za-z0-9_.-]+):(?:[ \t]+(.*))?$")
_PLAIN_BAD_START = set("&*!|>{[%@`'\"?,-#")
_NOT_A_STRING = re.compile(
    r"(?:~|null|Null|NULL|true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF"
    r"|[-+]?(?:\d[\d_]*)?\.?\d[\d_]*(?:[eE][-+]?\d+)?|0x[0-9a-fA-F]+|0o[0-7]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    r"|\d+:[0-5]?\d(?::[0-5]?\d)*)$"
)


@dataclass(slots=True)
class Doc:
    """One resource of a render: identity, where it came from, and the object when it was parsed."""

    api_version: str
    kind: str
    name: str
    namespace: str
    source: str
    line: int
    obj: dict[str, Any] | None = None

    @property
    def group(self) -> str:
        return group_of(self.api_version)

    def key(
        self, *, default_namespace: str, cluster_scoped: frozenset[tuple[str, str]] = CLUSTER_SCOPED
    ) -> ResourceKey:
        if (self.group, self.kind) in cluster_scoped:
            return ResourceKey(self.group, self.kind, "", self.name)
        return ResourceKey(self.group, self.kind, self.namespace or default_namespace, self.name)

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def scan_stream(text: str, *, source: str = "<render>", limits: Limits = DEFAULT_LIMITS) -> list[Doc]:
    """Every resource in ``text`` with its identity; malformed documents raise ManifestError.

    A few regular-expression passes over the whole stream (in C) find the top-level keys, the
    metadata blocks, the ``# Source:`` comments and anything odd; Python then only looks at each
    document's small metadata block. Odd documents go through the full parser.
    """
    if len(text) > limits.max_bytes:
        raise LimitExceeded(f"{len(text)} bytes is over the limit of {limits.max_bytes}", source=source)
    chunks = list(split_documents(text))
    offsets: list[int] = []
    pos = 0
    for _, chunk in chunks:
        offsets.append(pos)
        pos += len(chunk)
    # every pattern starts with "\n" (the engine then jumps from newline to newline), so prefix one:
    # a match at m.start() in ``nl`` is a line that starts at m.start() in ``text``
    nl = "\n" + text
    odd = {_doc_of(offsets, m.start()) for rx in (_TABS, _ODD_TOP) for m in rx.finditer(nl)}
    ends = [o + len(c) for o, (_, c) in zip(offsets, chunks, strict=True)]
    tops: list[dict[str, tuple[str, int]]] = [{} for _ in chunks]
    meta_ranges: dict[int, tuple[int, int]] = {}  # doc -> [start, end) of its metadata block in text
    i = 0
    last = len(offsets) - 1
    open_meta = -1
    for m in _TOP.finditer(nl):
        at = m.start()
        while i < last and offsets[i + 1] <= at:
            i += 1
        if open_meta >= 0:
            start = meta_ranges[open_meta][0]
            meta_ranges[open_meta] = (start, at if open_meta == i else ends[open_meta])
            open_meta = -1
        key = m.group(1)
        if key in tops[i]:
            odd.add(i)
        tops[i][key] = (m.group(2) or "", m.end() - 1)
        if key == "metadata":
            meta_ranges[i] = (m.end(), ends[i])
            open_meta = i
    # the common layout: metadata's children two spaces in; read them for every document at once
    children: dict[int, dict[str, str]] = {}
    for rx, record in ((_CHILD2, True), (_ODD2, False)):
        i = 0
        for m in rx.finditer(nl):
            at = m.start()
            while i < last and offsets[i + 1] <= at:
                i += 1
            span = meta_ranges.get(i)
            if span is None or not span[0] <= at < span[1]:
                continue
            if not record:
                odd.add(i)
                continue
            found = children.setdefault(i, {})
            if m.group(1) in found:
                odd.add(i)
            found[m.group(1)] = m.group(2) or ""
    sources: dict[int, str] = {}
    for m in _SOURCE.finditer(nl):
        sources.setdefault(_doc_of(offsets, m.start()), m.group(1).strip())
    docs: list[Doc] = []
    for i, (line, chunk) in enumerate(chunks):
        if i in odd:
            fast = None
        else:
            span = meta_ranges.get(i)
            if span is not None and _INDENT2.match(text, span[0], span[1]):
                fast = _identity2(tops[i], children.get(i, {}))
            else:
                fast = _identity(text, tops[i], ends[i])
        if fast is None:
            docs += _parsed(chunk, source=sources.get(i, source), where=source, line=line, limits=limits)
        elif fast is not _EMPTY:
            docs.append(Doc(fast[0], fast[1], fast[2], fast[3], sources.get(i, source), line))
        if len(docs) > limits.max_documents:
            raise LimitExceeded(f"more than {limits.max_documents} documents", source=source, line=line)
    return docs


def _doc_of(offsets: list[int], at: int) -> int:
    return bisect_right(offsets, at) - 1


def _parsed(chunk: str, *, source: str, where: str, line: int, limits: Limits) -> list[Doc]:
    out = []
    for d in load_stream(chunk, source=where, limits=limits, first_line=line):
        meta = d.obj["metadata"]
        name = str(meta.get("name") or meta.get("generateName"))
        out.append(
            Doc(
                str(d.obj["apiVersion"]),
                str(d.obj["kind"]),
                name,
                str(meta.get("namespace") or ""),
                source,
                d.line,
                d.obj,
            )
        )
    return out


def keys_of(docs: list[Doc], *, default_namespace: str) -> list[ResourceKey]:
    """ResourceKeys for ``docs``, with cluster scopes declared by CRDs in the same render."""
    scoped = cluster_scoped_kinds(
        d.obj for d in docs if d.obj is not None and d.kind == "CustomResourceDefinition"
    )
    return [
        resource_key(d.obj, default_namespace=default_namespace, cluster_scoped=scoped)
        if d.obj is not None
        else d.key(default_namespace=default_namespace, cluster_scoped=scoped)
        for d in docs
    ]


_EMPTY: Any = object()


_TABS = re.compile(r"\n *\t")
# a column-0 line that is neither blank, a comment, a document marker, nor `key:` / `key: value`
_ODD_TOP = re.compile(r"\n(?=[^ \r\n#])(?!---(?:[ \t\r\n]|$))(?![A-Za-z0-9_.-]+:(?:[ \t]|\r?\n|\r?$))")
_TOP = re.compile(r"\n([A-Za-z0-9_.-]+):(?:[ \t]+([^\n]*?))?[ \t]*\r?(?=\n|$)")
_NEXT_TOP = re.compile(r"^(?=[^ \r\n#])", re.M)
_FIRST_CHILD = re.compile(r"^( +)(?=[^ \r\n#])", re.M)
_SOURCE = re.compile(r"\n# Source: ([^\n]*)")
_by_indent: dict[int, tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str] | None]] = {}


def _patterns(n: int) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str] | None]:
    """(identity keys, odd lines at metadata's level, outdented lines) for child indent ``n``."""
    found = _by_indent.get(n)
    if found is None:
        keys = re.compile(rf"^ {{{n}}}(name|namespace|generateName):(?:[ \t]+([^\n]*?))?[ \t]*\r?$", re.M)
        odd = re.compile(rf"^ {{{n}}}(?=[^ \r\n#])(?![A-Za-z0-9_.-]+:(?:[ \t]|\r?$))", re.M)
        out = re.compile(rf"^ {{1,{n - 1}}}(?=[^ \r\n#])", re.M) if n > 1 else None
        found = _by_indent[n] = (keys, odd, out)
    return found


_CHILD2 = re.compile(r"\n  (name|namespace|generateName):(?:[ \t]+([^\n]*?))?[ \t]*\r?(?=\n|$)")
# inside metadata: a line at indent 1, or at indent 2 that is not `key:`: the parser decides
_ODD2 = re.compile(r"\n(?: (?=[^ \r\n#])|  (?=[^ \r\n#])(?![A-Za-z0-9_.-]+:(?:[ \t]|\r?\n|\r?$)))")
_INDENT2 = re.compile(r"  [^ \r\n#]")


def _identity2(top: dict[str, tuple[str, int]], meta: dict[str, str]) -> Any:
    """The identity when metadata's children sit two spaces in (read by the stream-wide passes)."""
    meta_top = top["metadata"]
    if meta_top[0] and not meta_top[0].startswith("#"):
        return None
    api, kind = _scalar(top.get("apiVersion", ("", 0))[0]), _scalar(top.get("kind", ("", 0))[0])
    if not api or not kind or kind.endswith("List") or kind == "CustomResourceDefinition":
        return None
    values = {}
    for key, raw in meta.items():
        value = _scalar(raw)
        if value is None:
            return None
        values[key] = value
    name = values.get("name") or values.get("generateName")
    if not name:
        return None
    return api, kind, name, values.get("namespace", "")


def _identity(text: str, top: dict[str, tuple[str, int]], end: int) -> Any:
    """(apiVersion, kind, name, namespace) from a plain block document; _EMPTY; or None (parse it)."""
    if not top:
        return _EMPTY
    meta_top = top.get("metadata")
    if meta_top is None or (meta_top[0] and not meta_top[0].startswith("#")):
        return None
    api, kind = _scalar(top.get("apiVersion", ("", 0))[0]), _scalar(top.get("kind", ("", 0))[0])
    if not api or not kind or kind.endswith("List") or kind == "CustomResourceDefinition":
        return None
    start = meta_top[1] + 1
    nxt = _NEXT_TOP.search(text, start, end)
    block = text[start : nxt.start() if nxt else end]
    first_child = _FIRST_CHILD.search(block)
    if first_child is None:
        return None
    keys, odd, outdented = _patterns(len(first_child.group(1)))
    if odd.search(block) or (outdented is not None and outdented.search(block)):
        return None  # "- item", flow, complex keys or outdented lines in metadata: let the parser decide
    meta: dict[str, str] = {}
    for key, value in keys.findall(block):
        scalar = _scalar(value)
        if scalar is None or key in meta:
            return None
        meta[key] = scalar
    name = meta.get("name") or meta.get("generateName")
    if not name:
        return None
    return api, kind, name, meta.get("namespace", "")


_PLAIN_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9._/-]*")
_YAML_WORDS = frozenset(
    {"true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes", "YES", "no", "No", "NO",
     "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "y", "Y", "n", "N"}
)  # fmt: skip


def _scalar(rest: str | None) -> str | None:
    """The string value of a simple scalar, or None when only a parser can say."""
    if rest is None:
        return None
    if _PLAIN_WORD.fullmatch(rest) and rest not in _YAML_WORDS:
        return rest  # the common case: apps/v1, Deployment, payment-api
    value = rest.strip()
    if " #" in value:
        value = value.split(" #", 1)[0].rstrip()
    if not value:
        return None
    if value[0] == '"':
        if len(value) >= 2 and value[-1] == '"' and "\\" not in value and '"' not in value[1:-1]:
            return value[1:-1]
        return None
    if value[0] == "'":
        if len(value) >= 2 and value[-1] == "'" and "'" not in value[1:-1]:
            return value[1:-1]
        return None
    if value[0] in _PLAIN_BAD_START or ": " in value or value.endswith(":") or _NOT_A_STRING.match(value):
        return None
    return value

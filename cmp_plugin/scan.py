"""Read the identity of every document in a rendered stream, fast.

The guards need each document's apiVersion, kind, name and namespace, not an object model, and
the plugin passes the render through unchanged. Three tiers, each only where it can be sure:

1. ``_scan_helm``: helm's own layout (``---``, ``# Source:``, apiVersion, kind, metadata, name,
   namespace on consecutive lines) read by one regular expression per stream, then proved free of
   anything that could change an identity by whole-stream counts (exactly one apiVersion, kind and
   metadata line per document, no other name/namespace line at metadata's indent, no tabs, no odd
   column-0 line). Any doubt and the whole stream goes to tier 2. 3,200 resources: ~10 ms.
1.5 ``_scan_flow``: a stream whose every document is one flow mapping (or JSON) from column 0,
   read by the flow reader (``scan_docs._flow_identities``, all documents at once) without
   tier 2's line passes, where tier 2 would read it the same way.
2. ``_scan_general``: a line scanner for any plain block-style stream (kustomize's key order too);
   documents in flow style or JSON go to the flow reader, a List's items are scanned as a stream.
3. Every document tier 2 cannot read with certainty (anchors, tags, block scalars, quoting with
   escapes, hooks, anything odd) goes through the full safe parser.

Argo CD parses the stream itself afterwards, so invalid YAML still fails there rather than being
synced. Property tests hold every tier to the parser's answers, tier 1.5 to tier 2's, and each
batched reading (flow documents, closed flow lines, hook documents) to its one-by-one reference.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Any, NamedTuple

from cmp_plugin.scan_docs import _crd_spec, _flow_identities
from cmp_plugin.scan_rules import (
    _EMPTY,
    _HIDING,
    _children,
    _hidden,
    _identity,
    _in_metadata,
    may_decide_kept,
)
from cmp_plugin.scan_scalars import _multiline_flow_scalars
from cmp_plugin.scan_text import (
    _AFTER_END,
    _DOC_END,
    _NEXT_TOP,
    _YAML_WORDS_LIST,
    _identity2,
)
from driftguard.errors import LimitExceeded, ManifestError
from driftguard.manifests import (
    CLUSTER_SCOPED,
    DEFAULT_LIMITS,
    DOC_START,
    Limits,
    ResourceKey,
    cluster_scoped_kinds,
    group_of,
    load_stream,
    resource_key,
    split_documents,
)

__all__ = ["Doc", "may_decide_kept", "scan_stream"]


class Doc(NamedTuple):
    """One resource of a render: identity, where it came from, and the object when it was parsed.

    NamedTuples, not dataclasses, on the whole ``generate`` path: ``dataclasses`` imports
    ``inspect`` (~10 ms), a quarter of a small chart's render (bench/cmp_overhead.py).
    """

    api_version: str
    kind: str
    name: str
    namespace: str
    source: str
    line: int
    obj: dict[str, Any] | None = None
    crd: tuple[str, str, str] | None = None
    """For a CustomResourceDefinition read by the scanner: (spec.group, spec.names.kind, spec.scope)."""
    named: bool = True
    """False when ``name`` is the object's ``generateName`` (it has no ``metadata.name``)."""

    @property
    def group(self) -> str:
        return group_of(self.api_version)

    def key(
        self, *, default_namespace: str, cluster_scoped: frozenset[tuple[str, str]] = CLUSTER_SCOPED
    ) -> ResourceKey:
        group = self.group
        if (group, self.kind) in cluster_scoped:
            return ResourceKey(group, self.kind, "", self.name)
        return ResourceKey(group, self.kind, self.namespace or default_namespace, self.name)

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def scan_stream(text: str, *, source: str = "<render>", limits: Limits = DEFAULT_LIMITS) -> list[Doc]:
    """Every resource in ``text`` with its identity; malformed documents raise ManifestError.

    Tier 1 (helm's layout) when it can prove its answer, else tier 2 and the parser (module doc).
    """
    if len(text) > limits.max_bytes:
        raise LimitExceeded(f"{len(text)} bytes is over the limit of {limits.max_bytes}", source=source)
    docs = _scan_helm(text, source=source, limits=limits)
    if docs is None:
        docs = _scan_flow(text, source=source, limits=limits)
    return docs if docs is not None else _scan_general(text, source=source, limits=limits)


# helm's layout of a document's start. Each value is a plain word that YAML reads as a string: it
# starts with a letter or "_" (so it is no number) and is none of YAML 1.1's boolean/null words.
# Line ends may be CRLF. The marker line may carry a comment, and comment or blank lines may come
# before apiVersion (a "# Source:" among them, not first, fails the Source count below).
_NOT_A_WORD = r"(?!(?:" + "|".join(sorted(_YAML_WORDS_LIST)) + r")[ \t]*\r?(?:\n|\Z))"


def _word(group: str, *, last: bool = False) -> str:
    """A plain word that YAML reads as a string, in ``group``, and its line's end (``last``: the
    newline is left to the next document's "\n---", for a document that ends with this line)."""
    end = r"[ \t]*\r?(?=\n|\Z)" if last else r"[ \t]*\r?\n"
    return _NOT_A_WORD + rf"(?P<{group}>[A-Za-z_][A-Za-z0-9_./-]*)" + end


_HELM_HEAD = re.compile(
    r"\n---(?:[ \t]+#[^\n]*+)?[ \t]*\r?\n"
    r"(?:# Source: (?P<src>[^\n]*)\n)?"
    r"(?:#[^\n]*+\n|[ \t]*+\r?\n)*+"
    r"(?:apiVersion: "
    + _word("api")
    + r"kind: "
    + _word("kind")
    + r"|kind: "
    + _word("kind2")
    + r"apiVersion: "
    + _word("api2")
    + r")"
    r"metadata:[ \t]*\r?\n"
    # metadata's children two or four spaces in; other children before its name (kustomize's
    # order: annotations, labels, name), each a key line and its deeper lines; name and namespace
    # lines at that indentation are counted over the whole stream
    r"(?=(?P<ind>  |    )[^ \r\n])"
    r"(?:(?P=ind)(?!name:|namespace:|generateName:)[A-Za-z0-9_./-]+:[^\n]*+\n(?:(?P=ind) [^\n]*+\n|[ \t]*+\r?\n)*+)*+"
    r"(?P=ind)name: "
    + _word("name", last=True)
    + r"(?:\n(?P=ind)namespace: "
    + _word("ns", last=True)
    + r")?"
)
_IDENTITY_TOP = re.compile(r"\n(?:apiVersion|kind|metadata):")
# like _ODD_TOP, but a column-0 sequence item ("rules:\n- apiGroups: ...") is fine here: it belongs
# to the key above it, and a hidden "kind:" line would still show in the _IDENTITY_TOP count
_ODD_TOP_HELM = re.compile(
    r"\n(?=[^ \r\n#])(?!---(?:[ \t\r\n]|$))(?!-(?:[ \t]|\r?\n|\r?$))(?![A-Za-z0-9_.-]+:(?:[ \t]|\r?\n|\r?$))"
)
_IDENTITY_CHILD = {ind: re.compile(rf"\n{ind}(?:name|namespace|generateName):") for ind in ("  ", "    ")}
# ... and a "..." document-end marker is fine too (what follows it is checked apart)
_ODD_TOP_HELM_END = re.compile(_ODD_TOP_HELM.pattern + r"(?!\.\.\.(?:[ \t]|\r?\n|\r?$))")


def _scan_helm(text: str, *, source: str, limits: Limits) -> list[Doc] | None:
    """Tier 1: every document in helm's layout, proved by whole-stream counts; None when unsure.

    A stream whose first document has no "---" (kustomize's, kubectl's) is read with one put
    before it, each line number then one less (the first document's stays 1, as the parser's).
    """
    if not text.startswith("---"):
        if text.startswith("%"):
            return None  # a directive: "---" may not go before it
        marked = _scan_helm("---\n" + text, source=source, limits=limits)
        return None if marked is None else [d._replace(line=max(1, d.line - 1)) for d in marked]
    nl = "\n" + text
    if _HELM_HEAD.match(nl) is None:
        return None  # the first document is not in helm's layout (finditer's first match is not at 0)
    heads = list(_HELM_HEAD.finditer(nl))
    n = len(heads)
    if n == 0 or n > limits.max_documents or heads[0].start() != 0:
        return None
    if len(DOC_START.findall(nl)) != n or ("\t" in nl and _TABS.search(nl)) or _ODD_TOP_HELM_END.search(nl):
        return None  # a document not in helm's layout, tab indentation, or an odd column-0 line
    if "\n..." in nl:  # document-end markers: only comments and more markers up to the next "---"
        starts = [m.start() for m in heads]
        for m in _DOC_END.finditer(nl):
            i = bisect_right(starts, m.start())
            if _AFTER_END.fullmatch(text, m.start(), starts[i] if i < n else len(text)) is None:
                return None
    if len(_IDENTITY_TOP.findall(nl)) != 3 * n:
        return None  # some document repeats apiVersion, kind or metadata (or hides one in a scalar)
    # every head's groups read at once: (src, api, kind, kind2, api2, ind, name, ns)
    groups = [m.groups() for m in heads]
    spans = [m.span() for m in heads]
    lines: dict[str, int] = {}  # name and namespace lines the heads read, by indentation
    sources = 0
    odd = {k: _children(k)[1] for k in (2, 4)}
    for (src, _, _, _, _, ind, _, ns), (_, stop) in zip(groups, spans, strict=True):
        lines[ind] = lines.get(ind, 0) + (1 if ns is None else 2)
        if src is not None:
            sources += 1
        k = len(ind)  # metadata's children: two or four spaces in
        if _HEAD_CONTINUED[k].match(nl, stop):
            return None  # the head's last value continued on a deeper line: tier 2 parses it
        # the rest of metadata (after the head's name/namespace line): every line at metadata's
        # indent a plain ``key:`` (or ``- item``), none less indented. A quoted, explicit (``?``),
        # merge (``<<``) or spaced (``namespace  :``) key there may be a second name or namespace
        # Go reads last.
        nxt = _NEXT_TOP.search(nl, stop - 1)
        if odd[k].search(nl, stop - 1, nxt.start() + 1 if nxt else len(nl)):
            return None
    for ind, read in lines.items():
        if len(_IDENTITY_CHILD[ind].findall(nl)) != read:
            return None  # a name/namespace/generateName line the heads did not account for
    if nl.count("\n# Source: ") != sources:
        return None
    starts = [at for at, _ in spans]  # in nl: the newline before each "---", i.e. its offset in text
    if any(c in text for c in _HIDING):
        decided = {i for i in range(n) if may_decide_kept(text, starts[i], _end(starts, i, text))}
    else:
        # each document starts with its "---" line: ``items:`` never starts one
        decided = _holding(text, starts, ("/hook", "\nitems:"))
    docs: list[Doc] = []
    append = docs.append
    count = text.count
    new = tuple.__new__  # Doc(...) without namedtuple's Python __new__: a tenth of this tier
    line, prev = 1, 0
    for i, (src, api, kind, kind2, api2, _, name, ns) in enumerate(groups):
        at = starts[i]
        line += count("\n", prev, at)
        prev = at
        api, kind = api or api2, kind or kind2
        if kind.endswith("List") or kind == "CustomResourceDefinition" or i in decided:
            # tier 2 on this document alone: a CRD's scope without parsing it; a List flattened; a
            # possible hook annotation or top-level ``items`` key parsed (cmp_plugin/target.py)
            docs += _scan_general(
                text[at : _end(starts, i, text)], source=source, limits=limits, first_line=line
            )
        else:
            src = src.strip(" \t\r") if src is not None else None
            # named: the head has name:
            append(new(Doc, (api, kind, name, ns or "", src or source, line, None, None, True)))
    return docs


def _end(starts: list[int], i: int, text: str) -> int:
    return starts[i + 1] if i + 1 < len(starts) else len(text)


def _holding(text: str, starts: list[int], subs: tuple[str, ...]) -> set[int]:
    """The documents (starting at ``starts`` in ``text``) holding one of ``subs``, or an escape
    and a double quote: ``_hook_or_items`` / ``_hook_or_escape`` of each, found by a few
    ``str.find`` loops over the whole stream rather than a call per document.

    An occurrence counts for the document that holds all of it, as ``str.find(sub, start, end)``
    counts it.
    """
    found: set[int] = set()
    for sub in subs:
        at = text.find(sub)
        while at >= 0:
            i = bisect_right(starts, at) - 1
            if i >= 0 and at + len(sub) <= _end(starts, i, text):
                found.add(i)
            at = text.find(sub, at + 1)
    at = text.find("\\")
    while at >= 0:  # an escape, in a document with a double quote
        i = bisect_right(starts, at) - 1
        end = _end(starts, i, text)
        if i >= 0 and text.find('"', starts[i], end) >= 0:
            found.add(i)
        at = text.find("\\", end)
    return found


# a document that is one flow mapping from column 0: its marker, comment and blank lines, then "{"
_FLOW_START = re.compile(r"(?:---[ \t]*+(?:#[^\n]*+)?\r?\n)?(?:[ \t]*+(?:#[^\n]*+)?\r?\n)*+(?=\{)")
_ITEMS_TOP = re.compile(r"\nitems:")


def _scan_flow(text: str, *, source: str, limits: Limits) -> list[Doc] | None:
    """Tier 1.5: a stream whose every document is one flow mapping (or JSON) from column 0, read by
    ``_flow_identities`` without tier 2's line passes; None when unsure.

    Tier 2 reads such a stream the same way (each "{" line is an odd column-0 line, so each
    document goes to the flow reader) unless a document may hold a hook or an escape, an identity
    value continued on a deeper line, a tag or a line break other than LF, or a column-0 ``items:``
    line: then None, and tier 2 decides.
    """
    if _FLOW_START.match(text) is None or any(c in text for c in _HIDING):
        return None
    nl = "\n" + text
    if _ITEMS_TOP.search(nl) or _CONTINUED.search(nl):
        return None
    chunks = list(split_documents(text))
    offsets: list[int] = []
    pos = 0
    match = _FLOW_START.match
    for _, chunk in chunks:
        if match(chunk) is None:
            return None
        offsets.append(pos)
        pos += len(chunk)
    if _holding(text, offsets, ("/hook",)):
        return None
    sources: dict[int, str] = {}
    for m in _SOURCE.finditer(nl):
        sources.setdefault(_doc_of(offsets, m.start()), m.group(1).strip())
    docs: list[Doc] = []
    new = tuple.__new__
    for i, ((line, chunk), fast) in enumerate(
        zip(chunks, _flow_identities([c for _, c in chunks]), strict=True)
    ):
        if fast is None:
            docs += _parsed(chunk, source=sources.get(i, source), where=source, line=line, limits=limits)
        else:  # never a CRD: the flow reader leaves those to the parser
            docs.append(
                new(
                    Doc,
                    (fast[0], fast[1], fast[2], fast[3], sources.get(i, source), line, None, None, fast[4]),
                )
            )
        if len(docs) > limits.max_documents:
            raise LimitExceeded(f"more than {limits.max_documents} documents", source=source, line=line)
    return docs


def _scan_general(text: str, *, source: str, limits: Limits, first_line: int = 1) -> list[Doc]:
    """Tier 2: the line scanner for any block-style stream, the parser for what it cannot read.

    A few regular-expression passes over the whole stream (in C) find the top-level keys, the
    metadata blocks, the ``# Source:`` comments and anything odd; Python then only looks at each
    document's small metadata block. Odd documents go through the full parser.
    """
    chunks = list(split_documents(text, first_line=first_line))
    offsets: list[int] = []
    pos = 0
    for _, chunk in chunks:
        offsets.append(pos)
        pos += len(chunk)
    # every pattern starts with "\n" (the engine then jumps from newline to newline), so prefix one:
    # a match at m.start() in ``nl`` is a line that starts at m.start() in ``text``
    nl = "\n" + text
    ends = [o + len(c) for o, (_, c) in zip(offsets, chunks, strict=True)]
    odd = {
        _doc_of(offsets, m.start())
        for rx in (_TABS, _ODD_TOP)
        if rx is not _TABS or "\t" in nl
        for m in rx.finditer(nl)
    }
    odd |= {_doc_of(offsets, at) for at in _multiline_flow_scalars(nl, skip=(offsets, ends, odd))}
    # content on a "---" line (every such line starts a document): the parser reads it
    odd |= {
        i for i, (_, chunk) in enumerate(chunks) if chunk[3:4] in (" ", "\t") and _MARKER_CONTENT.match(chunk)
    }
    # a document-end marker (only comments and markers may follow it), and a top-level items key:
    # what decides Argo CD's reading (hooks, Lists) is parsed, but a List's items may be scanned
    listed: set[int] = set()
    ended: set[int] = set()
    for m in _END_OR_ITEMS.finditer(nl):
        i = _doc_of(offsets, m.start())
        if m.group(1) is None:
            listed.add(i)
        elif i not in ended:
            ended.add(i)
            if _AFTER_END.fullmatch(text, m.start(), ends[i]) is None:
                odd.add(i)
    # parsed, never read by the flow or List readers: a hook key or an escape (``_hook_or_escape``),
    # an identity value continued on a deeper line, a tag or a line break other than LF
    # (``may_decide_kept``: go-yaml reads what a line scanner does not)
    argo = _holding(text, offsets, ("/hook",))  # _hook_or_escape of each document
    argo |= {_doc_of(offsets, m.start()) for m in _CONTINUED.finditer(nl)}
    if any(c in text for c in _HIDING):
        argo |= {i for i, (_, chunk) in enumerate(chunks) if _hidden(chunk, 0, len(chunk))}
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
        rest = m.group(2)
        if rest and rest[0] not in " \t\r":
            continue  # "key:value" is no key line (_ODD_TOP has marked it)
        key = m.group(1)
        if key in tops[i]:
            odd.add(i)
        tops[i][key] = (rest.strip(" \t\r"), m.end() - 1)
        if key == "metadata":
            meta_ranges[i] = (m.end(), ends[i])
            open_meta = i
    # the common layouts: metadata's children n spaces in, n the same for many documents (2, 4);
    # read them for every document of each n at once
    indent: dict[int, int] = {}
    for i, (lo, hi) in meta_ranges.items():
        first = _META_INDENT.match(text, lo, hi)
        if first is not None:
            indent[i] = first.end() - lo - 1
    children: dict[int, dict[str, str]] = {}
    passes = [
        (rx, rec, n)
        for n in sorted(set(indent.values()))
        for rx, rec in zip(_children(n), (True, False), strict=True)
    ]
    for rx, record, n in passes:
        for i, m in _in_metadata(rx, nl, n, indent, meta_ranges, offsets):
            at = m.start()
            span = meta_ranges.get(i)
            if span is None or not span[0] <= at < span[1] or indent.get(i) != n:
                continue
            if not record:
                odd.add(i)
                continue
            rest = m.group(2)
            if rest and rest[0] not in " \t\r":
                continue  # "name:value" is no key line (the odd-line pass has marked it)
            found = children.setdefault(i, {})
            if m.group(1) in found:
                odd.add(i)
            found[m.group(1)] = rest.strip(" \t\r")
    sources: dict[int, str] = {}
    for m in _SOURCE.finditer(nl):
        sources.setdefault(_doc_of(offsets, m.start()), m.group(1).strip())
    # documents in flow style or JSON (odd for the line passes): read together
    flowing = sorted(odd - argo - listed)
    flows = dict(zip(flowing, _flow_identities([chunks[i][1] for i in flowing]), strict=True))
    docs: list[Doc] = []
    new = tuple.__new__  # Doc(...) without namedtuple's Python __new__
    for i, (line, chunk) in enumerate(chunks):
        if i in argo:
            fast = None
        elif i in listed:
            items = None if i in odd else _list_items(text, tops[i], ends[i], limits=limits)
            if items is not None:
                src = sources.get(i, source)
                # d._replace(source=src, line=line), without its Python layers
                docs += [new(Doc, (d[0], d[1], d[2], d[3], src, line, d[6], d[7], d[8])) for d in items]
                continue
            fast = None
        elif i in odd:
            fast = flows[i]
        else:
            if i in indent:
                fast = _identity2(tops[i], children.get(i, {}))
            else:
                fast = _identity(text, tops[i], ends[i])
        crd = None
        if fast is not None and fast is not _EMPTY and fast[1] == "CustomResourceDefinition":
            crd = _crd_spec(text, tops[i], ends[i])
            if crd is None:
                fast = None
        if fast is None:
            docs += _parsed(chunk, source=sources.get(i, source), where=source, line=line, limits=limits)
        elif fast is not _EMPTY:
            docs.append(
                new(
                    Doc,
                    (fast[0], fast[1], fast[2], fast[3], sources.get(i, source), line, None, crd, fast[4]),
                )
            )
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
                None,
                bool(meta.get("name")),
            )
        )
    return out


def keys_of(docs: list[Doc], *, default_namespace: str) -> list[ResourceKey]:
    """ResourceKeys for ``docs`` as Argo CD keys them before the hook split (cmp_plugin/target.py),
    with cluster scopes declared by CRDs in the same render."""
    scoped = cluster_scoped_kinds(
        d.obj for d in docs if d.obj is not None and d.kind == "CustomResourceDefinition"
    )
    extra = {
        (g, k) for d in docs if d.crd is not None for g, k, scope in (d.crd,) if scope == "Cluster" and k
    }
    if extra:
        scoped = scoped | extra
    kinds: dict[tuple[str, str], tuple[str, bool]] = {}  # (apiVersion, kind) -> (group, cluster-scoped)
    keys: list[ResourceKey] = []
    for i, d in enumerate(docs):
        if d.obj is not None:
            key = resource_key(d.obj, default_namespace=default_namespace, cluster_scoped=scoped)
        else:
            known = kinds.get((d.api_version, d.kind))
            if known is None:
                group = group_of(d.api_version)
                known = kinds[d.api_version, d.kind] = (group, (group, d.kind) in scoped)
            group, cluster = known
            key = ResourceKey(group, d.kind, "" if cluster else d.namespace or default_namespace, d.name)
        if not d.named:
            # controller/state.go NormalizeTargetObjects: a nameless object is keyed generateName + position
            key = key._replace(name=f"{d.name}{i}")
        keys.append(key)
    return keys


_TABS = re.compile(r"\n *\t")
# an identity key's plain value continued on a deeper line (after blank lines or not): YAML folds
# it in, ``kind: PersistentVolumeClaim`` + `` x`` is the kind ``PersistentVolumeClaim x``
# after helm's head (apiVersion, kind, metadata, name[, namespace] on consecutive lines) only its
# last value can go on: a line deeper than metadata's keys right after it (blank lines between),
# by metadata's indentation in the head (two or four spaces)
_HEAD_CONTINUED = {k: re.compile(rf"(?:[ \t]*+\r?\n)*+ {{{k + 1},}}+[^ \t\r\n#]") for k in (2, 4)}
_CONTINUED = re.compile(
    r"\n( *+)(?:apiVersion|kind|name|namespace|generateName):[ \t]++[^ \t\r\n#][^\n]*+\n"
    r"(?:[ \t]*+\r?\n)*+\1 ++[^ \t\r\n#]"
)
# a column-0 line that is neither blank, a comment, a document marker (start or end), nor `key:` /
# `key: value` (a column-0 "- item" belongs to the key above it, as kubectl and helm print
# "rules:\n- ..."); what may follow a "..." line is checked apart (_AFTER_END)
_ODD_TOP = _ODD_TOP_HELM_END
# a "---" line with more than blanks and a comment on it ("--- {kind: ...}", "--- |"): only the
# parser reads a document that starts on its marker's line
_MARKER_CONTENT = re.compile(r"---[ \t]++(?=[^ \t\r\n#]|\r(?!\n|$))")
_END_OR_ITEMS = re.compile(r"\n(?:(\.\.\.)(?=[ \t\r\n]|$)|items:)")
# the rest of the line is taken whole and stripped in Python: a lazy value followed by optional
# blanks backtracks quadratically over a long run of blanks (20 KB: 22 s)
_TOP = re.compile(r"\n([A-Za-z0-9_.-]+):([^\n]*)")
_SOURCE = re.compile(r"\n# Source: ([^\n]*)")


# metadata's first line: its children's indentation
_META_INDENT = re.compile(r" +[^ \r\n#]")


# --- the items of a List, scanned as documents of their own -------------------------------------
_ITEMS_END = re.compile(r"\n(?=[^ \r\n#-]|-[^ \t\r\n])")
_FIRST_ITEM = re.compile(r"\n( *+)(?=[^ \r\n#])")
_ITEM_RX: dict[int, tuple[re.Pattern[str], re.Pattern[str]]] = {}


def _list_items(text: str, top: dict[str, tuple[str, int]], end: int, *, limits: Limits) -> list[Doc] | None:
    """The items of a document whose ``items`` is a block sequence of block mappings (a List).

    Argo CD keeps the items, not the List (driftguard/manifests.py ``_flatten``). The sequence's
    items, each moved left by its own indentation, are scanned as a stream of documents of their
    own; None (parse the whole document) when any line is less indented than an item's keys, an
    item is no plain mapping (``-`` alone, a comment or a nested item on its first line), a moved
    line would read as a document marker, an item has ``items`` of its own (kept whole: one level
    is flattened), or any item needs the parser (hooks, nested items).
    """
    found = top.get("items")
    if found is None or (found[0] and not found[0].startswith("#")):
        return None  # "items: []", flow items, an anchor: the parser reads them
    start = found[1]
    stop = _ITEMS_END.search(text, start, end)
    region = text[start : stop.start() if stop else end]
    first = _FIRST_ITEM.search(region)
    if first is None:
        return None
    k = len(first.group(1))
    rx = _ITEM_RX.get(k)
    if rx is None:
        rx = _ITEM_RX[k] = (
            re.compile(rf"\n {{{k}}}- (?=[^ \t\r\n#])"),
            # a line less indented than an item's keys but no item, or one a moved marker: one pass
            re.compile(
                rf"\n(?! {{{k}}}- (?=[^ \t\r\n#]))(?= {{0,{k + 1}}}[^ \r\n])"
                rf"|\n {{{k + 2}}}(?:---|\.\.\.)(?=[ \t\r\n]|$)"
            ),
        )
    item, bad = rx
    if bad.search(region):
        return None
    moved, count = item.subn("\n---\n", region)
    moved = moved.replace("\n" + " " * (k + 2), "\n")
    if _ITEMS_TOP.search(moved):
        # an item with ``items`` of its own: Argo CD flattens a List one level (EachListItem in
        # reposerver/repository/repository.go GenerateManifests), the item is kept whole, where
        # scanning the items as a stream would flatten it again
        return None
    try:
        items = moved[1:]
        docs = _scan_helm(items, source="", limits=limits) or _scan_general(items, source="", limits=limits)
    except ManifestError:  # the parser words it for the whole document
        return None
    if len(docs) != count or any(d.obj is not None for d in docs):
        return None
    return docs

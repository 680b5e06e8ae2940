"""Read the identity of every document in a rendered stream, fast.

The guards need each document's apiVersion, kind, name and namespace, not an object model, and
the plugin passes the render through unchanged. Three tiers, each only where it can be sure:

1. ``_scan_helm``: helm's own layout (``---``, ``# Source:``, apiVersion, kind, metadata, name,
   namespace on consecutive lines) read by one regular expression per stream, then proved free of
   anything that could change an identity by whole-stream counts (exactly one apiVersion, kind and
   metadata line per document, no other name/namespace line at metadata's indent, no tabs, no odd
   column-0 line). Any doubt and the whole stream goes to tier 2. 3,200 resources: ~10 ms.
2. ``_scan_general``: a line scanner for any plain block-style stream (kustomize's key order too).
3. Every document tier 2 cannot read with certainty (flow style, anchors, tags, block scalars,
   quoting with escapes, ``*List`` kinds, CRDs, anything odd) goes through the full safe parser.

Argo CD parses the stream itself afterwards, so invalid YAML still fails there rather than being
synced. A property test holds tiers 1 and 2 to the parser's answers.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any, NamedTuple

from driftguard.errors import LimitExceeded, ManifestError
from driftguard.goyaml import go_plain_is_string
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

# the words go-yaml v2 (Argo CD's YAML; driftguard/goyaml.py) reads as booleans or null, not strings
_YAML_WORDS_LIST = (
    "true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes", "YES", "no", "No", "NO",
    "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "y", "Y", "n", "N",
)  # fmt: skip

_PLAIN_BAD_START = set("&*!|>{[%@`'\"?,-#")


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
    lines: dict[str, int] = {}  # name and namespace lines the heads read, by indentation
    for m in heads:
        ind = m.group("ind")
        lines[ind] = lines.get(ind, 0) + (1 if m.group("ns") is None else 2)
    for ind, read in lines.items():
        if len(_IDENTITY_CHILD[ind].findall(nl)) != read:
            return None  # a name/namespace/generateName line the heads did not account for
    if nl.count("\n# Source: ") != sum(1 for m in heads if m.group("src") is not None):
        return None
    for m in heads:
        k = len(m.group("ind"))  # metadata's children: two or four spaces in
        if _HEAD_CONTINUED[k].match(nl, m.end()):
            return None  # the head's last value continued on a deeper line: tier 2 parses it
        # the rest of metadata (after the head's name/namespace line): every line at metadata's
        # indent a plain ``key:`` (or ``- item``), none less indented. A quoted, explicit (``?``),
        # merge (``<<``) or spaced (``namespace  :``) key there may be a second name or namespace
        # Go reads last.
        nxt = _NEXT_TOP.search(nl, m.end() - 1)
        if _children(k)[1].search(nl, m.end() - 1, nxt.start() + 1 if nxt else len(nl)):
            return None
    docs: list[Doc] = []
    append = docs.append
    count = text.count
    decides = may_decide_kept if any(c in text for c in _HIDING) else _hook_or_items
    line, prev = 1, 0
    for i, m in enumerate(heads):
        at = m.start()  # in nl: the newline before this document's "---", i.e. its offset in text
        line += count("\n", prev, at)
        prev = at
        src, name, namespace = m.group("src", "name", "ns")
        api, kind = m.group("api") or m.group("api2"), m.group("kind") or m.group("kind2")
        src = src.strip(" \t\r") if src is not None else None
        end = heads[i + 1].start() if i + 1 < n else len(text)
        if kind.endswith("List") or kind == "CustomResourceDefinition" or decides(text, at, end):
            # tier 2 on this document alone: a CRD's scope without parsing it; a List flattened; a
            # possible hook annotation or top-level ``items`` key parsed (cmp_plugin/target.py)
            docs += _scan_general(text[at:end], source=source, limits=limits, first_line=line)
        else:
            append(Doc(api, kind, name, namespace or "", src or source, line))  # named: the head has name:
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
    argo = {i for i, (_, chunk) in enumerate(chunks) if _hook_or_escape(chunk)}
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
    docs: list[Doc] = []
    for i, (line, chunk) in enumerate(chunks):
        if i in argo:
            fast = None
        elif i in listed:
            items = None if i in odd else _list_items(text, tops[i], ends[i], limits=limits)
            if items is not None:
                src = sources.get(i, source)
                docs += [d._replace(source=src, line=line) for d in items]
                continue
            fast = None
        elif i in odd:
            fast = _flow_identity(chunk)
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
                Doc(fast[0], fast[1], fast[2], fast[3], sources.get(i, source), line, None, crd, fast[4])
            )
        if len(docs) > limits.max_documents:
            raise LimitExceeded(f"more than {limits.max_documents} documents", source=source, line=line)
    return docs


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


_EMPTY: Any = object()


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
# a document-end marker, and what may follow it up to the next "---": blank lines, comments and
# more markers (anything else is an error for the parser: "did not find expected <document start>")
_DOC_END = re.compile(r"\n\.\.\.(?=[ \t\r\n]|$)")
_END_OR_ITEMS = re.compile(r"\n(?:(\.\.\.)(?=[ \t\r\n]|$)|items:)")
_AFTER_END = re.compile(r"(?:(?:\.\.\.(?=[ \t\r\n]|\Z))?[ \t]*+(?:#[^\n]*+)?\r?+(?:\n|\Z))*+")
# the rest of the line is taken whole and stripped in Python: a lazy value followed by optional
# blanks backtracks quadratically over a long run of blanks (20 KB: 22 s)
_TOP = re.compile(r"\n([A-Za-z0-9_.-]+):([^\n]*)")
# the next column-0 line that is not a comment, searched from the newline before a line: anchored
# on "\n", so the engine jumps from newline to newline (a ``^`` in MULTILINE mode is tried at every
# character: 8 ms for a 1.4 MB CRD where this takes a fraction of one)
_NEXT_TOP = re.compile(r"\n(?=[^ \r\n#])")
_FIRST_CHILD = re.compile(r"^( +)(?=[^ \r\n#])", re.M)
_SOURCE = re.compile(r"\n# Source: ([^\n]*)")
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


# metadata's first line: its children's indentation
_META_INDENT = re.compile(r" +[^ \r\n#]")
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


def _identity2(top: dict[str, tuple[str, int]], meta: dict[str, str]) -> Any:
    """The identity when metadata's children were read by the stream-wide passes (``_children``)."""
    head = _api_kind(top["metadata"], top)
    return None if head is None else _with_meta(*head, meta.items())


def _api_kind(meta_top: tuple[str, int] | None, top: dict[str, tuple[str, int]]) -> tuple[str, str] | None:
    """(apiVersion, kind) when metadata is a block and the kind is one the scanner may read."""
    if meta_top is None or (meta_top[0] and not meta_top[0].startswith("#")):
        return None
    api, kind = _scalar(top.get("apiVersion", ("", 0))[0]), _scalar(top.get("kind", ("", 0))[0])
    if not api or not kind or kind.endswith("List"):
        return None
    if kind == "CustomResourceDefinition" and group_of(api) != "apiextensions.k8s.io":
        return None  # not the CRD kind cluster_scoped_kinds reads: leave it to the parser
    return api, kind


def _with_meta(api: str, kind: str, pairs: Iterable[tuple[str, str]]) -> Any:
    """(apiVersion, kind, name, namespace) from metadata's identity keys; None when only a parser can say."""
    meta: dict[str, str] = {}
    for key, raw in pairs:
        value = _scalar(raw)
        if value is None or key in meta:
            return None
        meta[key] = value
    name = meta.get("name") or meta.get("generateName")
    if not name:
        return None
    return api, kind, name, meta.get("namespace", ""), bool(meta.get("name"))


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


_PLAIN_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9._/-]*")
_YAML_WORDS = frozenset(_YAML_WORDS_LIST)


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
    if value[0] in _PLAIN_BAD_START or ": " in value or value.endswith(":") or not go_plain_is_string(value):
        return None
    return value


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
    """``_QUOTE_LINE.finditer(nl)``, faster: only lines holding one of its characters are tried.

    A match never leaves its line and ends on the first such character, so trying each line that
    holds one (found by ``str.find``, ~100x faster than the engine's scan of every line of a
    megabyte CRD) gives the same matches in the same order. With ``spans`` ([start, end) offsets
    of whole lines in ``nl``), only lines inside them are looked at.
    """
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
_F2 = rf"\{{(?:{_F0}|{_F1})*+\}}|\[(?:{_F0}|{_F1})*+\]"
_F3 = rf"\{{(?:{_F0}|{_F2})*+\}}|\[(?:{_F0}|{_F2})*+\]"
_CLOSED_LINE = re.compile(
    rf"\n *+(?:- ++)*+(?:[A-Za-z0-9_./-]++:[ \t]++)?(?:{_F3}|\"[^\"\\\n]*+\"|'[^'\n]*+')[ \t]*+\r?+(?=\n|$)"
)


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
# keys, merges, block scalars, reserved indicators, tabs, quotes inside plain scalars)
_FLOW_UNSURE = re.compile(r"[#&*!?|>%@`<\\\t'\"]")
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
    """
    head = _FLOW_HEAD.match(chunk)
    if head is None:
        return None
    import json

    body = chunk[head.end() :]
    end = _DOC_END.search(body)
    if end is not None:
        if _AFTER_END.fullmatch(body, end.start() + 1) is None:
            return None
        body = body[: end.start() + 1]
    global _JSON, _JSON_LAX
    if _JSON is None or _JSON_LAX is None:
        _JSON, _JSON_LAX = json.JSONDecoder(), json.JSONDecoder(strict=False)
    try:
        if body[1:].lstrip(" \t\r\n")[:1] not in ('"', "}"):
            raise ValueError("no JSON")  # a plain key first: flow YAML, not JSON
        obj = _JSON.decode(body)
        plain = False
    except ValueError:
        outside, quoted = [], []  # every quoted scalar marked, the text between them apart
        pos = 0
        at = _QUOTE_CHAR.search(body)
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
        if _FLOW_UNSURE.search("".join(outside)):
            return None
        # every plain scalar quoted (split out, joined by quotes)
        parts = ['"'.join(_FLOW_PLAIN.split(p)) for p in outside]
        for i, scalar in enumerate(quoted):
            parts.insert(2 * i + 1, scalar)
        try:
            obj = _JSON_LAX.decode("".join(parts))
        except ValueError:
            return None
        plain = True
    except RecursionError:
        return None
    if type(obj) is not dict:
        return None
    top = _flow_keys(obj, plain)
    if top is None or "items" in top:
        return None
    meta = _flow_keys(top.get("metadata"), plain)
    if meta is None:
        return None
    found = []
    for value in (top.get("apiVersion"), top.get("kind"), meta.get("name"), meta.get("generateName")):
        if value is not None:
            value = _flow_string(value, plain)
            if value is None:
                return None
        found.append(value)
    api, kind, name, generate = found
    namespace = meta.get("namespace")
    if namespace is not None:
        namespace = _flow_string(namespace, plain)
        if namespace is None:
            return None
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
    return value if _scalar(value) == value else None


# --- the items of a List, scanned as documents of their own -------------------------------------
_ITEMS_END = re.compile(r"\n(?=[^ \r\n#-]|-[^ \t\r\n])")
_FIRST_ITEM = re.compile(r"\n( *+)(?=[^ \r\n#])")
_ITEM_RX: dict[int, tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]] = {}


def _list_items(text: str, top: dict[str, tuple[str, int]], end: int, *, limits: Limits) -> list[Doc] | None:
    """The items of a document whose ``items`` is a block sequence of block mappings (a List).

    Argo CD keeps the items, not the List (driftguard/manifests.py ``_flatten``). The sequence's
    items, each moved left by its own indentation, are scanned as a stream of documents of their
    own; None (parse the whole document) when any line is less indented than an item's keys, an
    item is no plain mapping (``-`` alone, a comment or a nested item on its first line), a moved
    line would read as a document marker, or any item needs the parser (hooks, nested items).
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
            re.compile(rf"\n(?! {{{k}}}- (?=[^ \t\r\n#]))(?= {{0,{k + 1}}}[^ \r\n])"),
            re.compile(rf"\n {{{k + 2}}}(?:---|\.\.\.)(?=[ \t\r\n]|$)"),
        )
    item, bad, marker = rx
    if bad.search(region) or marker.search(region):
        return None
    count = len(item.findall(region))
    moved = item.sub("\n---\n", region)
    moved = moved.replace("\n" + " " * (k + 2), "\n")
    try:
        items = moved[1:]
        docs = _scan_helm(items, source="", limits=limits) or _scan_general(items, source="", limits=limits)
    except ManifestError:  # the parser words it for the whole document
        return None
    if len(docs) != count or any(d.obj is not None for d in docs):
        return None
    return docs

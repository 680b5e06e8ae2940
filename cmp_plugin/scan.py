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
from typing import Any, NamedTuple

from cmp_plugin.scan_docs import _crd_spec
from cmp_plugin.scan_scalars import _multiline_flow_scalars
from cmp_plugin.scan_text import (
    _FIRST_CHILD,
    _NEXT_TOP,
    _YAML_WORDS_LIST,
    _api_kind,
    _identity2,
    _with_meta,
)
from driftguard.errors import LimitExceeded
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
    return docs if docs is not None else _scan_general(text, source=source, limits=limits)


# helm's layout of a document's start. Each value is a plain word that YAML reads as a string: it
# starts with a letter or "_" (so it is no number) and is none of YAML 1.1's boolean/null words.
_WORD = r"(?!(?:" + "|".join(sorted(_YAML_WORDS_LIST)) + r")[ \t]*\n)([A-Za-z_][A-Za-z0-9_./-]*)[ \t]*\n"
_HELM_HEAD = re.compile(
    r"\n---[ \t]*\n"
    r"(?:# Source: ([^\n]*)\n)?"
    r"apiVersion: " + _WORD + r"kind: " + _WORD + r"metadata:[ \t]*\n"
    r"  name: " + _WORD + r"(?:  namespace: " + _WORD + r")?"
)
_IDENTITY_TOP = re.compile(r"\n(?:apiVersion|kind|metadata):")
# like _ODD_TOP, but a column-0 sequence item ("rules:\n- apiGroups: ...") is fine here: it belongs
# to the key above it, and a hidden "kind:" line would still show in the _IDENTITY_TOP count
_ODD_TOP_HELM = re.compile(
    r"\n(?=[^ \r\n#])(?!---(?:[ \t\r\n]|$))(?!-(?:[ \t]|\r?\n|\r?$))(?![A-Za-z0-9_.-]+:(?:[ \t]|\r?\n|\r?$))"
)
_IDENTITY_CHILD2 = re.compile(r"\n  (?:name|namespace|generateName):")


def _scan_helm(text: str, *, source: str, limits: Limits) -> list[Doc] | None:
    """Tier 1: every document in helm's layout, proved by whole-stream counts; None when unsure."""
    if not text.startswith("---"):
        return None
    nl = "\n" + text
    heads = list(_HELM_HEAD.finditer(nl))
    n = len(heads)
    if n == 0 or n > limits.max_documents or heads[0].start() != 0:
        return None
    if len(DOC_START.findall(nl)) != n or ("\t" in nl and _TABS.search(nl)) or _ODD_TOP_HELM.search(nl):
        return None  # a document not in helm's layout, tab indentation, or an odd column-0 line
    if len(_IDENTITY_TOP.findall(nl)) != 3 * n:
        return None  # some document repeats apiVersion, kind or metadata (or hides one in a scalar)
    namespaces = sum(1 for m in heads if m.group(5) is not None)
    if len(_IDENTITY_CHILD2.findall(nl)) != n + namespaces:
        return None  # a name/namespace/generateName line the head did not account for
    if nl.count("\n# Source: ") != sum(1 for m in heads if m.group(1) is not None):
        return None
    for m in heads:
        if _HEAD_CONTINUED.match(nl, m.end()):
            return None  # the head's last value continued on a deeper line: tier 2 parses it
        # the rest of metadata (after the head's name/namespace line): every line at indent 2 a
        # plain ``key:``, none at indent 1. A quoted, explicit (``?``), merge (``<<``) or spaced
        # (``namespace  :``) key there may be a second name or namespace Go reads last.
        nxt = _NEXT_TOP.search(nl, m.end() - 1)
        if _ODD2.search(nl, m.end() - 1, nxt.start() + 1 if nxt else len(nl)):
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
        src, api, kind, name, namespace = m.groups()
        src = src.strip(" \t") if src is not None else None
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
    odd = {
        _doc_of(offsets, m.start())
        for rx in (_TABS, _ODD_TOP)
        if rx is not _TABS or "\t" in nl
        for m in rx.finditer(nl)
    }
    odd |= {_doc_of(offsets, at) for at in _multiline_flow_scalars(nl)}
    odd |= {_doc_of(offsets, m.start()) for m in _CONTINUED.finditer(nl)}
    decides = may_decide_kept if any(c in text for c in _HIDING) else _hook_or_items
    odd |= {i for i, (_, chunk) in enumerate(chunks) if decides(chunk, 0, len(chunk))}
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
            rest = m.group(2)
            if rest and rest[0] not in " \t\r":
                continue  # "name:value" is no key line (_ODD2 has marked it)
            found = children.setdefault(i, {})
            if m.group(1) in found:
                odd.add(i)
            found[m.group(1)] = rest.strip(" \t\r")
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
# last value can go on: a line deeper than metadata's keys right after it (blank lines between)
_HEAD_CONTINUED = re.compile(r"(?:[ \t]*+\r?\n)*+ {3,}+[^ \t\r\n#]")
_CONTINUED = re.compile(
    r"\n( *+)(?:apiVersion|kind|name|namespace|generateName):[ \t]++[^ \t\r\n#][^\n]*+\n"
    r"(?:[ \t]*+\r?\n)*+\1 ++[^ \t\r\n#]"
)
# a column-0 line that is neither blank, a comment, a document marker, nor `key:` / `key: value`
# (a column-0 "- item" belongs to the key above it, as kubectl and helm print "rules:\n- ...")
_ODD_TOP = _ODD_TOP_HELM
# the rest of the line is taken whole and stripped in Python: a lazy value followed by optional
# blanks backtracks quadratically over a long run of blanks (20 KB: 22 s)
_TOP = re.compile(r"\n([A-Za-z0-9_.-]+):([^\n]*)")
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


_CHILD2 = re.compile(r"\n  (name|namespace|generateName):([^\n]*)")
# inside metadata: a line at indent 1, or at indent 2 that is not `key:`: the parser decides
_ODD2 = re.compile(
    r"\n(?: (?=[^ \r\n#])|  (?=[^ \r\n#])(?!-(?:[ \t]|\r?\n|\r?$))(?![A-Za-z0-9_.-]+:(?:[ \t]|\r?\n|\r?$)))"
)
_INDENT2 = re.compile(r"  [^ \r\n#]")


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

"""The scanner's fast paths against the full parser on shapes picked to break them.

Tier 1.5 (a stream of flow mappings read together, plain scalars quoted by ``str.replace``
passes and decoded as JSON), the one-pass List reader, helm's heads and the stream-wide hook and
escape search each read identities without a parse. Here documents are built from the pieces
that make a flow or List reader go wrong: plain scalars holding colons, ``#``, commas, brackets,
quotes, ``- ``, ``?``, ``...``/``---``; anchors, aliases, merges, tags, escapes; keys quoted,
spaced, repeated or complex; flow mappings over several lines with comments between; Lists whose
items are flow or hold ``items`` of their own; flow and block documents mixed, LF or CRLF, with
other line breaks. Wherever the parser (driftguard/manifests.py, go-yaml's reading) reads the
stream, the scanner's identities, keys and kept set are its.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmp_plugin.scan import _parsed, _scan_flow, _scan_general, _scan_helm, scan_stream
from cmp_plugin.target import target
from driftguard.errors import ManifestError
from driftguard.manifests import DEFAULT_LIMITS
from tests.helpers import examples

IDENTITY_KEYS = ["apiVersion", "kind", "metadata", "name", "namespace", "generateName", "items"]
# a key as written: plain, quoted, spaced, tagged, complex, merged, anchored
KEY_FORMS = [
    "{k}", "{k}", "{k}", "{k}", '"{k}"', "'{k}'", "{k} ", "!!str {k}", "? {k} ", "&a {k}", '"{k}\\u0020"',
    '"{k1}\\x{hx}"', "{k}\t",
]  # fmt: skip
# plain scalars that look like something else
PLAINS = [
    "web", "data", "PersistentVolumeClaim", "v1", "a:b", "a: b", "a#b", "a #b", "a,b", "a]b", "a}b",
    "[a]", "{a: b}", "- a", "-a", "a - b", "a ? b", "?a", "a?", "0x1F", "1e3", ".inf", "~", "null",
    "Null", "true", "y", "n", "08", "1:30", "", "a\\b", "a'b", 'a"b', "'a'", '"a"', "'it''s'",
    '"a\\u0062"', '"a\\/b"', '"\\x85"', "*a", "&a web", "!!str web", "!!binary d2Vi", "a\n  b",
    "a\n# c\n  b", "...", "---", "a ... b", "a\x85b", "a\u2028b", "a\rb", "a\tb", "a  b", "é",
    "a\xa0b", "a :b", "a\n  :b", "<<", "a|b", "a>b", "%a", "@a", "`a", "a:", ":a", "a::b", "\\u0041", "\ufeffweb",
]  # fmt: skip
SEPS = [", ", ", ", ",", " ,", ",\n  ", ",\n# a comment\n  ", "\n, ", ",\r\n  ", ", # c\n  ", ",\n\ufeff"]
STREAM_SEPS = ["---\n", "---\n", "--- # a note\n", "---\n# Source: c/t.yaml\n", "---\n\n", "--- \n"]
ENDS = ["", "", "", "...\n", "... # end\n"]


@st.composite
def key(draw: Any, name: str) -> str:
    form = draw(st.sampled_from(KEY_FORMS))
    return form.format(k=name, k1=name[:-1], hx=format(ord(name[-1]), "02x"))


@st.composite
def value(draw: Any, default: str) -> str:
    if draw(st.integers(0, 3)):
        return default
    return draw(st.sampled_from(PLAINS + [default] * 4))


@st.composite
def pairs(draw: Any, fields: list[tuple[str, str]]) -> list[str]:
    out = [f"{draw(key(k))}: {draw(value(v))}" for k, v in fields]
    extra = draw(
        st.lists(
            st.sampled_from(
                [
                    "kind: Secret",
                    "namespace: other",
                    "namespace :other",
                    "name: other",
                    "<<: {namespace: other}",
                    "<<: *m",
                    "labels: &m {namespace: other}",
                    "items: []",
                    "items: [{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data}}]",
                    "argocd.argoproj.io/hook: PreSync",
                    '"argocd.argoproj.io\\x2fhook": PreSync',
                    "!!binary YXJnb2NkLmFyZ29wcm9qLmlvL2hvb2s=: PreSync",
                    "note: x",
                    "k: {a: [b, {c: d}]}",
                    "? [a, b] : c",
                    "a: b\n  c",
                    "x: 'a\n  name: fake'",
                    "x" * 1030 + ": long",
                    '"' + "x" * 1030 + '": long',
                ]
            ),
            max_size=2,
        )
    )
    out += extra
    order = draw(st.permutations(range(len(out))))
    return [out[i] for i in order]


@st.composite
def flow_doc(draw: Any) -> str:
    kind = draw(st.sampled_from(["PersistentVolumeClaim", "ConfigMap", "List", "Secret"]))
    meta = draw(pairs([("name", "data"), ("namespace", "plain")][: draw(st.integers(1, 2))]))
    sep = draw(st.sampled_from(SEPS))
    top = [f"{draw(key('apiVersion'))}: {draw(value('v1'))}", f"{draw(key('kind'))}: {draw(value(kind))}"]
    top.append(f"{draw(key('metadata'))}: {{{sep.join(meta)}}}")
    top += draw(st.lists(st.sampled_from(["spec: {volumeName: v}", "data: {k: v}", "items: []"]), max_size=1))
    order = draw(st.permutations(range(len(top))))
    return "{" + sep.join(top[i] for i in order) + "}\n"


@st.composite
def block_doc(draw: Any) -> str:
    kind = draw(st.sampled_from(["PersistentVolumeClaim", "ConfigMap"]))
    meta = draw(pairs([("name", "data"), ("namespace", "plain")][: draw(st.integers(1, 2))]))
    body = "".join(f"  {p}\n" for p in meta if "\n" not in p)
    return f"apiVersion: v1\nkind: {kind}\nmetadata:\n{body}spec:\n  volumeName: v\n"


@st.composite
def list_doc(draw: Any) -> str:
    k = draw(st.sampled_from([0, 2]))
    items = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            items.append(" " * k + "- " + draw(flow_doc()))
        else:
            lines = draw(block_doc()).splitlines(keepends=True)
            if draw(st.integers(0, 3)) == 0:  # an item with items of its own
                lines += ["items:\n", "- apiVersion: v1\n", "  kind: PersistentVolumeClaim\n"]
                lines += ["  metadata:\n", "    name: data\n"]
            items.append(" " * k + "- " + lines[0] + "".join(" " * (k + 2) + ln for ln in lines[1:]))
    head = draw(st.sampled_from(["apiVersion: v1\nkind: List\n", "kind: List\napiVersion: v1\n"]))
    return head + "items:\n" + "".join(items)


DOCS = st.one_of(flow_doc(), flow_doc(), flow_doc(), block_doc(), list_doc())


def reading(docs: list[Any]) -> list[tuple[str, str, str, str, bool]]:
    return [(d.api_version, d.kind, d.name, d.namespace, d.named) for d in docs]


def check(text: str) -> None:
    try:
        expected = _parsed(text, source="<render>", where="<render>", line=1, limits=DEFAULT_LIMITS)
    except ManifestError:  # the parser refuses it: so does Argo CD, whatever the scan read
        return
    got = scan_stream(text)
    assert reading(got) == reading(expected), text
    for tier in (_scan_helm, _scan_flow, _scan_general):  # each tier on its own, where it answers
        alone = tier(text, source="<render>", limits=DEFAULT_LIMITS)
        if alone is not None:
            assert reading(alone) == reading(expected), (tier.__name__, text)
    want, have = target(expected, destination_namespace="apps"), target(got, destination_namespace="apps")
    assert (have.keys, have.kept, have.left_out) == (want.keys, want.kept, want.left_out), text


@settings(max_examples=examples(800), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(STREAM_SEPS), DOCS, st.sampled_from(ENDS)), min_size=1, max_size=4),
    st.booleans(),
    st.sampled_from(["\n", "\n", "\n", "\r\n"]),
)
def test_tricky_flow_and_list_streams_read_as_the_parser_reads_them(
    docs: list[tuple[str, str, str]], bare_first: bool, newline: str
) -> None:
    text = "".join(sep + doc + end for sep, doc, end in docs)
    if bare_first:
        text = text.split("\n", 1)[1]
    check(text.replace("\n", newline))

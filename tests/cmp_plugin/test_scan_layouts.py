"""The identity scanner holds on any template layout, not one: a property test against the full parser.

Documents are generated in many layouts real charts use (keys in any order, labels before the
name, names with colons, top-level keys between kind and metadata, indentation 2 or 4, flow-style
metadata, CRDs with their scope anywhere in spec, block scalars and multi-line quoted scalars whose
lines look like keys) and the identities and CRD scopes the scanner reads are compared with what
the full parser (Go's YAML semantics, driftguard/goyaml.py) reads. And the realistic layouts are
read without parsing any document, CRDs included.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from cmp_plugin.scan import (
    _holding,
    _parsed,
    _scan_flow,
    _scan_general,
    _scan_helm,
    keys_of,
    scan_stream,
)
from cmp_plugin.scan_docs import _FLOW_PLAIN, _flow_identities, _flow_identity, _quote_plain
from cmp_plugin.scan_rules import _hook_or_escape, _hook_or_items
from cmp_plugin.scan_scalars import _quote_lines, _quote_lines_each
from cmp_plugin.target import target
from driftguard.errors import ManifestError
from driftguard.manifests import (
    DEFAULT_LIMITS,
    cluster_scoped_kinds,
    load_stream,
    resource_key,
    split_documents,
)
from tests.helpers import examples

PLAIN_NAMES = ["web", "system:metrics-server", "system:auth-delegator", "a.b-c", "2048-game", "=", "x"]
ODD_NAMES = ['"quoted"', "'single'", '"with: colon"', "web # comment", "y", "n", "08", "1e3", "1:30"]
ODD_NAMES += ["null", "~", "*alias", "&a anchored", "!!str 123"]
NAMES = st.sampled_from(PLAIN_NAMES * 3 + ODD_NAMES)
INDENTS = st.sampled_from([2, 4])


def _block(pairs: list[tuple[str, str]], indent: int) -> str:
    return "".join(
        f"{' ' * indent}{k}: {v}\n" if v is not None else f"{' ' * indent}{k}:\n" for k, v in pairs
    )


EXTRAS = st.sampled_from(
    [
        ("labels", "\n      app: web\n      name: not-the-name"),
        ("labels", "\n      app: web\n      name: not-the-name"),
        ("annotations", "\n      note: |\n        name: inside-a-block\n        kind: Nope"),
        ("labels", "\n      app: web\n      name: not-the-name"),
        ("labels", " {app: web, name: not-it}"),
        ("annotations", "\n      note: |\n        name: inside-a-block\n        kind: Nope"),
        ("annotations", '\n      note: "multi\n  name: fake"'),
        ("annotations", "\n      note: 'it''s\n  namespace: fake'"),
        ("annotations", '\n      q: "a \\" b"\n      r: \'# not a comment\''),
        ("finalizers", "\n    - a\n    - b"),
        ("annotations", '\n      odd key: "multi\n  name: fake"'),
        ("annotations", '\n      a:b: "multi\n  name: fake"'),
        ("annotations", "\n      note: &n 'multi\n  name: fake'"),
        ("annotations", "\n      note: text with 'quote\n        and more: text"),
    ]
)
TOP_EXTRAS = st.sampled_from(
    [
        "data:\n  name: in-data\n",
        "notes: |\n  kind: InABlock\n  metadata:\n    name: no\n",
        "spec:\n  template:\n    metadata:\n      name: pod\n",
        "rules:\n- name: in-a-rule\n  namespace: in-a-rule\n",
        "data:\n  name: in-data\n",
        'data: "multi\nkind: Hidden"\n',
        "notes: |\n  kind: InABlock\n  metadata:\n    name: no\n",
        "spec:\n  template:\n    metadata:\n      name: pod\n",
        "data: {a: '1', b: \"2\"}\n",
        "# a comment\n",
        'data:\n  k: "x: y"\n',
        "rules:\n- name: in-a-rule\n  namespace: in-a-rule\n",
        "items:\n- kind: Nested\n",
    ]
)


@st.composite
def metadata(draw: Any) -> str:
    n = draw(INDENTS)
    pairs: list[tuple[str, str]] = [("name", draw(NAMES))]
    if draw(st.booleans()):
        pairs.append(("namespace", draw(NAMES)))
    for key, value in draw(st.lists(EXTRAS, max_size=2)):
        pairs.append(
            (key, value.replace("\n      ", "\n" + " " * (n + 2)).replace("\n    -", "\n" + " " * n + "-"))
        )
    order = draw(st.permutations(range(len(pairs))))
    pairs = [pairs[i] for i in order]
    if draw(st.integers(0, 9)) == 0:
        inner = ", ".join(f"{k}: {v}" for k, v in pairs if "\n" not in v)
        return f"metadata: {{{inner}}}\n"
    return "metadata:\n" + _block(pairs, n)


@st.composite
def crd_spec(draw: Any) -> str:
    n = draw(INDENTS)
    kind = draw(st.sampled_from(["Widget", "Gadget", "y"]))
    names_block = draw(
        st.sampled_from(
            [
                f"\n{' ' * (2 * n)}plural: things\n{' ' * (2 * n)}kind: {kind}",
                f"\n{' ' * (2 * n)}kind: {kind}\n{' ' * (2 * n)}listKind: {kind}List",
                f"\n{' ' * (2 * n)}kind: {kind}\n{' ' * (2 * n)}plural: things",
                f" {{kind: {kind}, plural: things}}",
            ]
        )
    )
    pairs = [
        ("group", draw(st.sampled_from(["example.com", "monitoring.coreos.com", '"q.example.com"']))),
        ("names", names_block.lstrip(" ") if names_block.startswith(" ") else names_block),
        ("scope", draw(st.sampled_from(["Cluster", "Namespaced", "'Cluster'"]))),
        (
            "versions",
            f'\n{" " * n}- name: v1\n{" " * (n + 2)}schema:\n{" " * (n + 4)}description: "it\'s\n{" " * n}scope: Fake"',
        ),
        (
            "versions",
            f"\n{' ' * n}- name: v1\n{' ' * (n + 2)}enum:\n{' ' * (n + 2)}- =\n{' ' * (n + 2)}- '!='",
        ),
    ]
    chosen = [p for p in pairs if draw(st.booleans()) or p[0] in ("group", "names")]
    seen: set[str] = set()
    chosen = [p for p in chosen if not (p[0] in seen or seen.add(p[0]))]  # type: ignore[func-returns-value]
    order = draw(st.permutations(range(len(chosen))))
    return "spec:\n" + _block([chosen[i] for i in order], n)


@st.composite
def document(draw: Any) -> str:
    crd = draw(st.booleans())
    top = [
        "apiVersion: "
        + ("apiextensions.k8s.io/v1" if crd else draw(st.sampled_from(["v1", "apps/v1", "example.com/v1"])))
        + "\n",
        "kind: "
        + ("CustomResourceDefinition" if crd else draw(st.sampled_from(["ConfigMap", "Widget"])))
        + "\n",
        draw(metadata()),
    ]
    if crd:
        top.append(draw(crd_spec()))
    top += draw(st.lists(TOP_EXTRAS, max_size=2))
    order = draw(st.permutations(range(len(top))))
    return "".join(top[i] for i in order)


def parsed(text: str) -> list[Any]:
    docs = load_stream(text)
    scoped = cluster_scoped_kinds(d.obj for d in docs)
    return [resource_key(d.obj, default_namespace="apps", cluster_scoped=scoped) for d in docs]


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(document(), min_size=1, max_size=4), st.booleans())
def test_any_layout_reads_as_the_full_parser_reads_it(docs: list[str], helm_heads: bool) -> None:
    sep = "---\n# Source: chart/templates/t.yaml\n" if helm_heads else "---\n"
    text = "".join(sep + d for d in docs)
    try:
        expected = parsed(text)
    except Exception:  # invalid for the parser: Argo CD refuses it too
        return
    assert keys_of(scan_stream(text), default_namespace="apps") == expected


REALISTIC = """\
---
# Source: metrics-server/templates/clusterrole.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    app.kubernetes.io/name: metrics-server
  name: system:metrics-server
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
---
apiVersion: v1
kind: Service
spec:
  ports: [{port: 443}]
metadata:
  annotations:
    note: |
      name: not-this
  name: svc
  namespace: kube-system
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.16.1
  name: widgets.example.com
spec:
  group: example.com
  names:
    categories:
    - all
    kind: Widget
    plural: widgets
  scope: Cluster
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        description: 'Widget is a thing: it''s "quoted"'
        properties:
          matchType:
            enum:
            - '!='
            - =
            - =~
            type: string
    served: true
    storage: true
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
"""


def test_realistic_layouts_are_read_without_parsing_any_document() -> None:
    docs = scan_stream(REALISTIC)
    assert all(d.obj is None for d in docs), [d.kind for d in docs if d.obj is not None]
    assert keys_of(docs, default_namespace="apps") == parsed(REALISTIC)
    widget = [str(k) for k in keys_of(docs, default_namespace="apps") if k.kind == "Widget"]
    assert widget == ["Widget.example.com w"]  # cluster-scoped by the CRD read without a parse


def test_long_runs_of_blanks_are_read() -> None:
    # a run of blanks used to make the line regexes backtrack quadratically (20 KB: 22 s, 200 KB:
    # hours): with linear passes this finishes at once, with a quadratic one it does not finish
    pad = " " * 200_000
    text = f'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a{pad}b\n  namespace: x{pad}\ndata:\n  k: "{pad}"\n'
    (doc,) = scan_stream(text)
    assert (doc.name, doc.namespace, doc.obj) == (f"a{pad}b", "x", None)


# --- whole streams in any layout: separators, comments, flow style, JSON, Lists, CRLF, "..." ------
# A resource is drawn once and written in one of many layouts; the scanner's reading of the stream
# (identity, key, what Argo CD keeps) must be the full parser's (scan._parsed, the reference).

HOOKS = ["", "helm.sh/hook: pre-install", "argocd.argoproj.io/hook: Skip", "helm.sh/hook: crd-install"]
KINDS = [("v1", "ConfigMap"), ("apps/v1", "Deployment"), ("v1", "Namespace"), ("example.com/v1", "Widget")]
QUOTES = st.sampled_from(["{}", '"{}"', "'{}'"])
ANY_NAME = st.sampled_from(PLAIN_NAMES + ODD_NAMES)  # odd ones often: flow and JSON read them too


@st.composite
def resource(draw: Any) -> dict[str, Any]:
    api, kind = draw(st.sampled_from(KINDS))
    return {
        "api": api,
        "kind": kind,
        "name": draw(ANY_NAME),
        "namespace": draw(st.one_of(st.none(), ANY_NAME)),
        "generate": draw(st.integers(0, 9)) == 0,
        "hook": draw(st.sampled_from(HOOKS + [""] * 9)),
        "q": [draw(QUOTES) for _ in range(4)],
    }


def _meta_pairs(r: dict[str, Any]) -> list[tuple[str, str]]:
    pairs = [("generateName" if r["generate"] else "name", r["name"])]
    if r["namespace"] is not None:
        pairs.append(("namespace", r["namespace"]))
    return pairs


def block(r: dict[str, Any], n: int, order: list[int]) -> str:
    meta = "".join(f"{' ' * n}{k}: {v}\n" for k, v in _meta_pairs(r))
    if r["hook"]:
        meta += f"{' ' * n}annotations:\n{' ' * 2 * n}{r['hook']}\n"
    meta += f"{' ' * n}labels:\n{' ' * 2 * n}app: web\n"
    top = [f"apiVersion: {r['api']}\n", f"kind: {r['kind']}\n", "metadata:\n" + meta, "data:\n  k: v\n"]
    return "".join(top[i] for i in order)


def flow(r: dict[str, Any], json_style: bool, breaks: bool) -> str:
    def q(i: int, v: str) -> str:
        return json.dumps(v) if json_style else r["q"][i].format(v)

    k = (lambda s: json.dumps(s)) if json_style else (lambda s: s)
    meta = [f"{k(key)}: {q(i, v) if json_style else v}" for i, (key, v) in enumerate(_meta_pairs(r))]
    if r["hook"]:
        hk, hv = r["hook"].split(": ")
        meta.append(f"{k('annotations')}: {{{k(hk)}: {q(2, hv)}}}")
    sep = ",\n  " if breaks else ", "
    return (
        f"{{{k('apiVersion')}: {q(0, r['api'])}, {k('kind')}: {q(1, r['kind'])},"
        f"{' ' if not breaks else chr(10) + '  '}{k('metadata')}: {{{', '.join(meta)}}}{sep}"
        f"{k('data')}: {{{k('k')}: {q(3, 'v')}}}}}\n"
    )


@st.composite
def layout_document(draw: Any) -> str:
    style = draw(st.sampled_from(["block", "block", "flow", "json", "list"]))
    if style == "list":
        rs = draw(st.lists(resource(), min_size=1, max_size=3))
        k = draw(st.sampled_from([0, 2]))
        items = []
        for r in rs:
            body = block(r, draw(INDENTS), draw(st.permutations(range(4))))
            lines = body.splitlines(keepends=True)
            items.append(" " * k + "- " + lines[0] + "".join(" " * (k + 2) + ln for ln in lines[1:]))
        head = draw(st.sampled_from(["apiVersion: v1\nkind: List\n", "kind: List\napiVersion: v1\n", ""]))
        return head + "items:\n" + "".join(items) + draw(st.sampled_from(["", "metadata: {}\n"]))
    r = draw(resource())
    if style == "block":
        return block(r, draw(INDENTS), draw(st.permutations(range(4))))
    return flow(r, style == "json", draw(st.booleans()))


def _valid(doc: str) -> bool:
    try:
        _parsed(doc, source="<render>", where="<render>", line=1, limits=DEFAULT_LIMITS)
    except ManifestError:
        return False
    return True


SEPARATORS = ["---\n", "---   \n", "---\t\n", "--- # a note\n", "---\n# Source: chart/templates/t.yaml\n"]
LEADING = ["", "", "# a comment\n", "# first\n\n# second\n", "\n"]
ENDINGS = ["", "", "", "...\n", "...\n# after the end\n", "... # end\n...\n"]


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(SEPARATORS),
            st.sampled_from(LEADING),
            layout_document(),
            st.sampled_from(ENDINGS),
        ),
        min_size=1,
        max_size=5,
    ),
    st.booleans(),
    st.booleans(),
)
@example(
    [("---\n", "", "{apiVersion: v1, kind: A, metadata: {name: a, namespace: null}}\n", "")], False, False
)
@example(
    [("---\n", "", "{apiVersion: v1, kind: A, metadata: {name: a, namespace: ~}}\n", "...\n")], True, True
)
@example(
    [
        (
            "--- # a\n",
            "",
            "kind: List\nitems:\n  - apiVersion: v1\n    kind: A\n    metadata:\n      name: y\n",
            "",
        )
    ],
    False,
    False,
)
def test_any_stream_layout_is_read_as_the_full_parser_reads_it(
    docs: list[tuple[str, str, str, str]], bare_first: bool, crlf: bool
) -> None:
    docs = [d for d in docs if _valid(d[2])]  # one invalid document would void the whole stream
    assume(docs)
    text = "".join(sep + lead + doc + end for sep, lead, doc, end in docs)
    if bare_first:  # the first document without its "---"
        text = text.split("\n", 1)[1]
    if crlf:
        text = text.replace("\n", "\r\n")
    try:
        expected = _parsed(text, source="<render>", where="<render>", line=1, limits=DEFAULT_LIMITS)
    except ManifestError:  # invalid for the parser: Argo CD refuses it too
        return
    got = scan_stream(text)
    assert [(d.api_version, d.kind, d.name, d.namespace, d.named) for d in got] == [
        (d.api_version, d.kind, d.name, d.namespace, d.named) for d in expected
    ]
    for tier in (_scan_helm, _scan_flow, _scan_general):  # each tier on its own, where it answers
        alone = tier(text, source="<render>", limits=DEFAULT_LIMITS)
        if alone is not None:
            assert [(d.api_version, d.kind, d.name, d.namespace) for d in alone] == [
                (d.api_version, d.kind, d.name, d.namespace) for d in expected
            ]
    want, have = target(expected, destination_namespace="apps"), target(got, destination_namespace="apps")
    assert (have.keys, have.kept, have.left_out) == (want.keys, want.kept, want.left_out)


LAYOUT_STREAMS = {
    "comments first": "--- # generated\n# owner: a\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
    "indent 4": "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n    labels:\n        app: a\n    name: a\n",
    "flow": "---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {app: 'a'}},\n  data: {k: v}}\n",
    "json": '---\n{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}\n',
    "list": "---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n"
    "- apiVersion: v1\n  kind: Service\n  metadata:\n    name: a\n",
    "document end": "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n...\n# done\n",
    "crlf": "---\r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: a\r\n",
}


@pytest.mark.parametrize("layout", sorted(LAYOUT_STREAMS))
def test_big_render_layouts_are_read_without_parsing_any_document(layout: str) -> None:
    # bench/big_render_layouts.py's layouts: no document goes through the full parser (the cost
    # that made a 3,200-resource render 2-3x bare helm), and the reading is the parser's
    text = LAYOUT_STREAMS[layout] * 3
    docs = scan_stream(text)
    if layout in ("flow", "json"):  # tier 1.5 reads them, as tier 2 does
        assert _scan_flow(text, source="<render>", limits=DEFAULT_LIMITS) == docs
    assert docs and all(d.obj is None for d in docs), [d.kind for d in docs if d.obj is not None]
    expected = _parsed(text, source="<render>", where="<render>", line=1, limits=DEFAULT_LIMITS)
    assert [(d.api_version, d.kind, d.name, d.namespace) for d in docs] == [
        (d.api_version, d.kind, d.name, d.namespace) for d in expected
    ]


# --- every attack form in every layout ----------------------------------------------------------
# tests/cmp_plugin/test_kept_attacks.py's attacks (a second namespace/name key spelled so that a
# line scanner misses it, a hook key behind a tag, items after an odd line break, a value continued
# on a deeper line) crossed with every layout the fast tiers read, one or several documents, alone
# or as List items, LF or CRLF: the scanner's identities and kept set are the full parser's.

BINARY_HOOKS = {
    "argocd.argoproj.io/hook": "YXJnb2NkLmFyZ29wcm9qLmlvL2hvb2s=",
    "helm.sh/hook": "aGVsbS5zaC9ob29r",
}
ATTACKS = [
    "none",
    "merge",
    "quoted key",
    "spaced key",
    "complex key",
    "str tag",
    "binary hook",
    "verbatim binary hook",
    "escaped hook",
    "continued",
    "items after break",
    *(f"meta: {m}" for m in range(13)),
    *(f"top: {t}" for t in range(12)),
]
# more spellings of the same moves, each one Go reads differently from a plain line: in metadata
# ({k} the moved key), and at the top level (in a flow layout, as one more pair of the mapping)
META_FORMS = [
    "'{k}': other",
    "{k}\t: other",
    "<<: [{{{k}: other}}]",
    "labels: &l {{{k}: other}}\n<<: *l",
    "&a {k}: other",
    "labels: {{app: &k {k}}}\n*k : other",
    '"{k1}\\x{hx}": other',
    '"{k1}\\u00{hx}": other',
    "? !!str {k}\n: other",
    "!<tag:yaml.org,2002:str> {k}: other",
    "<<:\n  {k}: other",
    "annotations:\n  <<: {{argocd.argoproj.io/hook: PreSync}}",
    "labels: {{a: &h helm.sh/hook}}\nannotations:\n  *h : pre-install",
]
TOP_FORMS = [
    '"items": []',
    "? items\n: []",
    "<<: {items: []}",
    "!!str items: []",
    '"item\\x73": []',
    "x: &i items\n*i : []",
    '"kind": Secret',
    "<<: {kind: Secret}",
    '"metadata": {name: other, namespace: plain}',
    "<<: {metadata: {name: other}}",
    "? metadata\n: {name: other}",
    "<<: [{kind: Secret}, {items: []}]",
]


def _form(template: str, key: str | None, n: int) -> str:
    """``template`` (nested lines indented 2) as lines at indent ``n``, ``{k}`` the moved key."""
    text = template.format(k=key, k1=key[:-1], hx=format(ord(key[-1]), "02x")) if key else template
    nested = max(n, 2)
    return "".join(
        (" " * (n + nested) + ln[2:] if ln.startswith("  ") else " " * n + ln) + "\n"
        for ln in text.split("\n")
    )


BREAKS = ["\r", "\x85", "\u2028", "\u2029"]


def _block_attack(attack: str, key: str, n: int) -> list[str]:
    """Metadata lines (at indent ``n``, newline-terminated) that move ``key`` or hide a hook."""
    p = " " * n
    if attack.startswith("meta: "):
        return [_form(META_FORMS[int(attack[6:])], key, n)]
    return {
        "merge": [f"{p}<<: {{{key}: other}}\n"],
        "quoted key": [f'{p}"{key}": other\n'],
        "spaced key": [f"{p}{key}  : other\n"],
        "complex key": [f"{p}? {key}\n{p}: other\n"],
        "str tag": [f"{p}!!str {key}: other\n"],
        "binary hook": [
            f"{p}annotations:\n{p}{p}!!binary {BINARY_HOOKS['argocd.argoproj.io/hook']}: PreSync\n"
        ],
        "verbatim binary hook": [
            f"{p}annotations:\n{p}{p}!<tag:yaml.org,2002:binary> {BINARY_HOOKS['helm.sh/hook']}: pre-install\n"
        ],
        "escaped hook": [f'{p}annotations: {{"argocd.argoproj.io\\x2fhook": Sync}}\n'],
    }.get(attack, [])


def _flow_attack(attack: str, key: str, json_style: bool) -> list[str]:
    def k(s: str) -> str:
        return json.dumps(s) if json_style else s

    if attack.startswith("meta: ") and "\n" not in META_FORMS[int(attack[6:])]:
        return [META_FORMS[int(attack[6:])].format(k=key, k1=key[:-1], hx=format(ord(key[-1]), "02x"))]
    return {
        "merge": [f"{k('<<')}: {{{k(key)}: {k('other')}}}"],
        "quoted key": [f'"{key}": {k("other")}'],
        "spaced key": [f"{k(key)}  : {k('other')}"],
        "complex key": [f"? {k(key)} : {k('other')}"],
        "str tag": [f"!!str {k(key)}: {k('other')}"],
        "binary hook": [
            f"{k('annotations')}: {{!!binary {BINARY_HOOKS['argocd.argoproj.io/hook']}: PreSync}}"
        ],
        "verbatim binary hook": [
            f"{k('annotations')}: {{!<tag:yaml.org,2002:binary> {BINARY_HOOKS['helm.sh/hook']}: pre-install}}"
        ],
        "escaped hook": [f'{k("annotations")}: {{"argocd.argoproj.io\\x2fhook": Sync}}'],
    }.get(attack, [])


BLOCK_LAYOUTS = ["helm", "comments first", "kind first", "kustomize", "indent 4", "document end"]
FLOW_LAYOUTS = ["flow", "json"]


def attacked(layout: str, attack: str, key: str, name: str, brk: str) -> str:
    """A PVC ``name`` in namespace ``plain`` written in ``layout`` with ``attack`` on ``key``."""
    if layout in FLOW_LAYOUTS:
        js = layout == "json"

        def k(s: str) -> str:
            return json.dumps(s) if js else s

        name_v = k(name) + ("\n   x" if attack == "continued" and key == "name" and not js else "")
        ns_v = k("plain") + ("\n   x" if attack == "continued" and key == "namespace" and not js else "")
        meta = [f"{k('name')}: {name_v}", f"{k('namespace')}: {ns_v}", *_flow_attack(attack, key, js)]
        top_form = TOP_FORMS[int(attack[5:])] if attack.startswith("top: ") else ""
        more = f", {top_form}" if top_form and "\n" not in top_form else ""
        doc = (
            f"{{{k('apiVersion')}: {k('v1')}, {k('kind')}: {k('PersistentVolumeClaim')},\n"
            f"  {k('metadata')}: {{{', '.join(meta)}}},\n  {k('spec')}: {{{k('volumeName')}: {k('v')}}}{more}}}\n"
        )
    else:
        n = 4 if layout == "indent 4" else 2
        p = " " * n
        more = " " * (n + 1) + "x\n" if attack == "continued" else ""
        ident = [
            f"{p}name: {name}\n" + (more if key == "name" else ""),
            f"{p}namespace: plain\n" + (more if key == "namespace" else ""),
        ]
        extra = _block_attack(attack, key, n)
        labels = [f"{p}labels:\n{p}{p}app: web\n"]
        meta = labels + ident + extra if layout == "kustomize" else ident + extra + labels
        top = {
            "apiVersion": "apiVersion: v1\n",
            "kind": "kind: PersistentVolumeClaim\n",
            "metadata": "metadata:\n" + "".join(meta),
            "spec": f"spec:\n{p}volumeName: v\n",
        }
        order = ["kind", "apiVersion", "metadata", "spec"] if layout == "kind first" else list(top)
        doc = "".join(top[o] for o in order)
        if attack.startswith("top: "):
            doc += _form(TOP_FORMS[int(attack[5:])], None, 0)
        if layout == "comments first":
            doc = "# owner: a\n\n# generated\n" + doc
        if layout == "helm":
            doc = "# Source: chart/templates/pvc.yaml\n" + doc
    if attack == "items after break":
        doc = doc.rstrip("\n") + brk + "items: []\n"
    if layout == "document end":
        doc += "...\n"
    return doc


def as_list(docs: list[str], indent: int) -> str:
    items = []
    for d in docs:
        lines = d.replace("...\n", "").splitlines(keepends=True)
        lines = [ln for ln in lines if not ln.startswith("#") and ln.strip()]
        items.append(" " * indent + "- " + lines[0] + "".join(" " * (indent + 2) + ln for ln in lines[1:]))
    return "apiVersion: v1\nkind: List\nitems:\n" + "".join(items)


def _reading(docs: list[Any]) -> list[tuple[str, str, str, str, bool]]:
    return [(d.api_version, d.kind, d.name, d.namespace, d.named) for d in docs]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(BLOCK_LAYOUTS + FLOW_LAYOUTS),
            st.sampled_from(ATTACKS),
            st.sampled_from(["namespace", "name"]),
            st.sampled_from(BREAKS),
        ),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from(["", "---\n", "---\n", "--- # a note\n"]),
    st.sampled_from([None, 0, 2]),
    st.booleans(),
)
def test_every_attack_in_every_layout_is_read_as_the_full_parser_reads_it(
    parts: list[tuple[str, str, str, str]], first_sep: str, list_indent: int | None, crlf: bool
) -> None:
    docs = [
        attacked(layout, attack, key, f"data{i}", brk) for i, (layout, attack, key, brk) in enumerate(parts)
    ]
    if list_indent is not None:
        docs = [as_list(docs, list_indent)]
    text = first_sep + "---\n".join(docs)
    if crlf:
        text = text.replace("\n", "\r\n")
    try:
        expected = _parsed(text, source="<render>", where="<render>", line=1, limits=DEFAULT_LIMITS)
    except ManifestError:  # invalid for the parser: Argo CD refuses it too (and so does the scan)
        with pytest.raises(ManifestError):
            scan_stream(text)
        return
    got = scan_stream(text)
    assert _reading(got) == _reading(expected)
    want, have = target(expected, destination_namespace="apps"), target(got, destination_namespace="apps")
    assert (have.keys, have.kept, have.left_out) == (want.keys, want.kept, want.left_out)


# --- many flow documents read at once: the same answers as one by one ---------------------------
# scan_docs._flow_identities quotes the plain scalars of all flow documents in a few str.replace
# passes; _flow_identity (one document, a regular expression per scalar) is its reference.

PLAIN_ALPHABET = [*"ab1-./:, \n\r{}[]", "\x0c", "\xa0", "\u2028", "é", "\x01", ": ", ", ", "a b", "::"]


@settings(max_examples=examples(3000), deadline=None)
@given(st.lists(st.lists(st.sampled_from(PLAIN_ALPHABET), max_size=12).map("".join), min_size=1, max_size=4))
def test_fast_quoting_is_the_regular_expressions_or_no_json(parts: list[str]) -> None:
    # where the fast quoting answers, it is _FLOW_PLAIN's quoting, or differs by a plain scalar
    # with blanks in it ("a b") split in two: two quoted strings in a row, which no JSON decodes
    fast = _quote_plain(parts)
    assert fast == [_quote_plain([p])[0] for p in parts]  # joined or one by one: the same
    for p, q in zip(parts, fast, strict=True):
        if q is not None and q != '"'.join(_FLOW_PLAIN.split(p)):
            assert re.search(r'"[ \n\r]+"', q), (p, q)


FLOW_ODD = st.sampled_from(
    [
        "",
        "",
        ", note: a b",
        ", note: :a",
        ", note: a:{b: c}",
        ", note: [a:, b]",
        ", 'q': x",
        ', "q": "x"',
        ", note: 'it''s'",
        ", note: \xa0x",
        ", note: x\x0cy",
        ", k: {a: b, c: [d, e]}",
        ", items: []",
        ", kind: Secret",
        ", note: 'a' b",
        ", note: [[[[x]]]]",
        ", note: x\n  y",
    ]
)


@st.composite
def flow_chunk(draw: Any) -> str:
    doc = flow(draw(resource()), draw(st.booleans()), draw(st.booleans()))
    odd = draw(FLOW_ODD)
    if odd:
        doc = doc.rstrip("\n")[:-1] + odd + "}\n"
    return draw(st.sampled_from(["---\n", "---\n# Source: t.yaml\n", ""])) + doc


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(flow_chunk(), min_size=1, max_size=6))
def test_flow_documents_read_together_as_one_by_one(chunks: list[str]) -> None:
    assert _flow_identities(chunks) == [_flow_identity(c) for c in chunks]


# --- lines that may start a multi-line scalar: stepped over in C as line by line -----------------
LINE_ATOMS = [
    "\n",
    "\n",
    "  ",
    "a: ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    "&",
    "!",
    "x",
    ",",
    "#",
    "\r",
    "\\",
]
LINE_ATOMS += ["b: {c: d}", "e: 'f'", ' "g"', "h: [{i: 1}, j]", "k: [", "\n- {l: m}"]


@settings(max_examples=examples(2000), deadline=None)
@given(st.lists(st.sampled_from(LINE_ATOMS), max_size=16).map("".join), st.data())
def test_quote_lines_are_the_line_by_line_ones(body: str, data: Any) -> None:
    nl = "\n" + body
    spans = None
    if data.draw(st.booleans()):  # whole lines, as _multiline_flow_scalars passes them
        starts = [i for i, c in enumerate(nl) if c == "\n"] + [len(nl)]
        cut = sorted(data.draw(st.sets(st.sampled_from(starts), min_size=1, max_size=5)))
        spans = [(cut[i], cut[i + 1]) for i in range(0, len(cut) - 1, 2)]
    fast = [(m.start(), m.end()) for m in _quote_lines(nl, spans)]
    assert fast == [(m.start(), m.end()) for m in _quote_lines_each(nl, spans)]


# --- what decides a document's reading, found over the whole stream: as document by document ----
HOLD_ATOMS = ["a: b\n", "/hook", "/ho", "ok", "\\", '"', "\nitems:", "items:", "\n", "x"]


@settings(max_examples=examples(1000), deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(HOLD_ATOMS), max_size=6).map("".join), min_size=1, max_size=5),
    st.booleans(),
)
def test_documents_holding_a_hook_or_escape_are_found_as_one_by_one(bodies: list[str], bare: bool) -> None:
    text = "".join("---\n" + b + "\n" for b in bodies)
    if bare:  # tier 2: the first document without its "---" (tier 1 reads none such)
        text = text[4:]
    starts = [at for at, _ in _doc_spans(text)]
    chunks = [chunk for _, chunk in split_documents(text)]
    ends = [*starts[1:], len(text)]
    assert _holding(text, starts, ("/hook",)) == {i for i, c in enumerate(chunks) if _hook_or_escape(c)}
    if bare:
        return
    assert _holding(text, starts, ("/hook", "\nitems:")) == {
        i for i, (lo, hi) in enumerate(zip(starts, ends, strict=True)) if _hook_or_items(text, lo, hi)
    }


def _doc_spans(text: str) -> list[tuple[int, int]]:
    out, at = [], 0
    for _, chunk in split_documents(text):
        out.append((at, at + len(chunk)))
        at += len(chunk)
    return out


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(flow_chunk(), min_size=1, max_size=5), st.booleans())
def test_a_flow_stream_reads_in_tier_1_5_as_in_tier_2(chunks: list[str], crlf: bool) -> None:
    # where tier 1.5 answers (every document one flow mapping from column 0), it is tier 2's
    # answer, the parser's refusals included
    text = "".join(c if i == 0 or c.startswith("---") else "---\n" + c for i, c in enumerate(chunks))
    if crlf:
        text = text.replace("\n", "\r\n")

    def read(tier: Any) -> Any:
        try:
            return tier(text, source="<render>", limits=DEFAULT_LIMITS)
        except ManifestError as e:
            return str(e)

    got = read(_scan_flow)
    if got is not None:
        assert got == read(_scan_general)


@pytest.mark.parametrize("kind", ["List", "ConfigMap"])
@pytest.mark.parametrize("indent", [0, 2])
def test_a_list_item_with_items_of_its_own_is_kept_whole(kind: str, indent: int) -> None:
    # Argo CD flattens a List one level (driftguard/manifests.py _flatten): the item stays, its
    # own items are no resources; scanned as a stream of its own, it was flattened again
    item = (
        f"apiVersion: v1\nkind: {kind}\nmetadata:\n  name: inner\nitems:\n"
        "- apiVersion: v1\n  kind: PersistentVolumeClaim\n  metadata:\n    name: data\n"
    )
    text = as_list([item], indent)
    assert keys_of(scan_stream(text), default_namespace="apps") == parsed(text)
    assert [k.kind for k in parsed(text)] == [kind]


DEEP = "[" * 3000 + "]" * 3000


@pytest.mark.parametrize(
    "text",
    [
        f"---\n{{apiVersion: v1, kind: ConfigMap, metadata: {{name: deep}}, x: {DEEP}}}\n",
        f"{{apiVersion: v1, kind: ConfigMap, metadata: {{name: deep}}, x: {DEEP}}}\n---\n"
        "{apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n",
        f"apiVersion: v1\nkind: List\nitems:\n- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: a}}, x: {DEEP}}}\n",
        f'---\n{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "deep"}}, "x": {DEEP}}}\n',
    ],
)
def test_a_flow_document_nested_too_deep_is_refused_by_the_limit(text: str) -> None:
    # deeper than Python's recursion: the flow reader hands the document to the parser, whose
    # refusal is a LimitExceeded (a ManifestError the CLI words), never a RecursionError
    with pytest.raises(ManifestError, match="nesting too deep"):
        scan_stream(text)


@pytest.mark.parametrize(
    "text",
    [
        "{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data},\n\ufeffkind: ConfigMap}\n",
        "---\n{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data,\n\ufeffnamespace: x}}\n",
        "---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: data}}\n---\n"
        '{"apiVersion": "v1", "kind": "ConfigMap",\n\ufeff"metadata": {"name": "b"}, "metadata": {"name": "c"}}\n',
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data},\n"
        "  \ufeffkind: ConfigMap}\n",
    ],
)
def test_a_bom_at_a_line_start_in_flow_is_skipped_as_go_yaml_skips_it(text: str) -> None:
    # go-yaml (scannerc.go yaml_parser_scan_to_next_token) and libyaml skip a BOM at column 0
    # before any token: the key after it is a plain key, a second kind or namespace read last
    assert keys_of(scan_stream(text), default_namespace="apps") == parsed(text)


@pytest.mark.parametrize(
    "meta",
    [
        "name: data, namespace :other",
        "name: data, namespace  :other",
        "name: data, namespace\n  :other",
        "name: data,\n  namespace :other, labels: {a: b}",
        'name: data, "namespace" :other',
        "namespace: plain, name :other",
    ],
)
def test_a_colon_after_blanks_in_a_flow_plain_scalar_is_part_of_it(meta: str) -> None:
    # go-yaml's plain scalar (scannerc.go yaml_parser_scan_plain_scalar) ends at ":" only before
    # a blank: "namespace :other" is one key (null value), no namespace "other"
    for text in (
        f"{{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {{{meta}}}}}\n",
        f"---\n{{apiVersion: v1, kind: ConfigMap, metadata: {{name: a}}}}\n---\n"
        f"{{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {{{meta}}}}}\n",
    ):
        try:
            expected = parsed(text)
        except ManifestError:
            with pytest.raises(ManifestError):
                scan_stream(text)
            continue
        assert keys_of(scan_stream(text), default_namespace="apps") == expected

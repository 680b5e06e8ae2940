"""The fast identity scanner agrees with the full YAML parser, on plain and on odd YAML."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cmp_plugin import scan_scalars
from cmp_plugin.process import tool_env
from cmp_plugin.scan import _scan_general, _scan_helm, keys_of, scan_stream
from cmp_plugin.settings import CmpSettings
from driftguard.manifests import DEFAULT_LIMITS, load_stream, resource_key
from tests.helpers import examples

ODD = """\
---
# Source: chart/templates/a.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  labels:
    name: not-the-name
  name: "quoted"
  namespace: 'single' # trailing comment
data:
  k: |
    name: inside-a-block
---
apiVersion: v1
kind: ConfigMap
metadata: {name: flow, namespace: f}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: &anchor anchored
  labels: {x: *anchor}
---
apiVersion: v1
kind: ConfigMap
metadata:
    name: "esc\\"aped"
---
{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "json", "namespace": "j"}}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed}
---
apiVersion: v1
kind: ConfigMap
metadata:
  generateName: gen-
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: x
spec:
  template:
    metadata:
      name: pod-template-name
      namespace: nope
"""


def full(text: str) -> list[tuple[str, str, str, str]]:
    return [
        (
            d.obj["apiVersion"],
            d.obj["kind"],
            str(d.obj["metadata"].get("name") or d.obj["metadata"].get("generateName")),
            str(d.obj["metadata"].get("namespace") or ""),
        )
        for d in load_stream(text)
    ]


def fast(text: str) -> list[tuple[str, str, str, str]]:
    return [(d.api_version, d.kind, d.name, d.namespace) for d in scan_stream(text)]


def test_odd_yaml_matches_the_full_parser() -> None:
    assert fast(ODD) == full(ODD)
    docs = scan_stream(ODD)
    assert docs[0].source == "chart/templates/a.yaml" and docs[0].obj is None  # read by the fast path
    assert docs[1].obj is not None  # flow style went through the parser


def test_a_numeric_name_is_refused_like_kubernetes_refuses_it() -> None:
    import pytest

    from driftguard.errors import ManifestError

    with pytest.raises(ManifestError, match=r"metadata\.name"):
        scan_stream("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 123\n")


def test_keys_use_crd_scope_from_the_same_render() -> None:
    text = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: pools.example.com}
spec: {group: example.com, scope: Cluster, names: {kind: Pool}}
---
apiVersion: example.com/v1
kind: Pool
metadata:
  name: a
  namespace: ignored
"""
    keys = keys_of(scan_stream(text), default_namespace="apps")
    assert keys[1].namespace == ""
    assert keys == [
        resource_key(
            d.obj,
            default_namespace="apps",
            cluster_scoped=frozenset({("example.com", "Pool")})
            | frozenset({("apiextensions.k8s.io", "CustomResourceDefinition")}),
        )
        for d in load_stream(text)
    ]


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=12).filter(
    lambda s: s[0].isalnum()
)
odd_values = st.one_of(
    names,
    st.sampled_from(
        ["true", "null", "0x1f", "1e3", "~", "a: b", "#x", "-dash", "*star", "&amp", "'q'", 'd"q']
    ),
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.tuples(
            odd_values, st.one_of(st.none(), odd_values), st.sampled_from(["", "  ", "    "]), st.booleans()
        ),
        min_size=1,
        max_size=5,
    )
)
def test_scanner_never_disagrees_with_the_parser(items: list[tuple[str, Any, str, bool]]) -> None:
    docs = []
    for name, namespace, indent, flow in items:
        ind = indent or "  "
        if flow:
            meta = (
                "metadata: "
                + yaml.safe_dump({"name": name, "namespace": namespace}, default_flow_style=True).strip()
            )
        else:
            meta = f"metadata:\n{ind}name: {name}\n" + (
                f"{ind}namespace: {namespace}\n" if namespace is not None else ""
            )
        docs.append(f"apiVersion: v1\nkind: ConfigMap\n{meta}\n")
    text = "---\n".join(docs)
    try:
        expected = full(text)
    except Exception:
        return  # not valid YAML for the parser either: Argo CD refuses it too
    assert fast(text) == expected


# --- tier 1: helm's own layout, proved by whole-stream counts -------------------------------------

PERTURBATIONS = [
    "",
    "kind: Secret\n",  # a second kind: the parser takes the last one
    "data:\n  name: in-data\n",  # a name line at metadata's indent, outside metadata
    'data: "multi\nkind: Hidden"\n',  # a column-0 key line inside a quoted scalar
    "# Source: elsewhere.yaml\n",
    "spec:\n  template:\n    metadata:\n      name: pod\n",
    # still in metadata: a second name/namespace Go reads last, in forms a line scanner misses
    "  <<: {namespace: merged}\n",
    '  "namespace": quoted\n',
    "  namespace  : spaced\n",
    "  ? name\n  : explicit\n",
    "   continued\n",  # the last metadata value folded on
]


MARKERS = ["---\n", "---\n", "--- # a note\n", "---  \n"]
LEADS = ["", "", "# a comment\n\n", "# first\n# Source: not-first.yaml\n"]
ENDS = ["", "", "...\n", "... # end\n# after it\n", "...\nkind: AfterTheEnd\n"]
BEFORE_NAME = [  # metadata's children before its name (kustomize's order), some hiding a name line
    "",
    "",
    "  labels:\n    a: b\n",
    "  annotations:\n    note: |\n      name: inside\n\n  labels: {a: b}\n",
    '  annotations:\n    a: "multi\n  name: fake"\n',
    "  annotations:\n    a: 'multi\n  namespace: fake'\n",
]


def helm_doc(
    name: str,
    namespace: str | None,
    source: bool,
    late_namespace: bool,
    extra: str,
    marker: str = "---\n",
    lead: str = "",
    end: str = "",
    before_name: str = "",
    four: bool = False,
    kind_first: bool = False,
) -> str:
    head = marker + ("# Source: chart/templates/t.yaml\n" if source else "") + lead
    meta = f"metadata:\n{before_name}  name: {name}\n"
    if namespace is not None:
        meta += (
            f"  labels:\n    a: b\n  namespace: {namespace}\n"
            if late_namespace
            else f"  namespace: {namespace}\n"
        )
    if four:  # metadata's children four spaces in, what is under them two more
        meta = meta.replace("\n    ", "\n      ").replace("\n  ", "\n    ")
    top = "kind: ConfigMap\napiVersion: v1\n" if kind_first else "apiVersion: v1\nkind: ConfigMap\n"
    return head + top + meta + extra + end


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.tuples(
            odd_values,
            st.one_of(st.none(), odd_values),
            st.booleans(),
            st.booleans(),
            st.sampled_from(PERTURBATIONS),
            st.sampled_from(MARKERS),
            st.sampled_from(LEADS),
            st.sampled_from(ENDS),
            st.sampled_from(BEFORE_NAME),
            st.booleans(),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    ),
    st.booleans(),
)
@example([("a", "null", True, False, "", "--- # a note\n", "# a comment\n\n", "...\n")], True)  # CRLF: null
@example([("a", "b", True, False, "", "---\n", "# first\n# Source: not-first.yaml\n", "")], False)
@example([("a", "b", False, True, "", "---\n", "", "", "", True, True)], False)  # 4 in, late namespace
def test_the_helm_tier_never_disagrees_with_the_parser(items: list[tuple[Any, ...]], crlf: bool) -> None:
    text = "".join(helm_doc(*item) for item in items)
    if crlf:
        text = text.replace("\n", "\r\n")
    try:
        expected = full(text)
    except Exception:
        return  # not valid YAML for the parser either: Argo CD refuses it too
    tier1 = _scan_helm(text, source="helm", limits=DEFAULT_LIMITS)
    if tier1 is not None:
        assert [(d.api_version, d.kind, d.name, d.namespace) for d in tier1] == expected
    assert fast(text) == expected


def test_real_helm_output_is_read_by_the_helm_tier(tmp_path: Path) -> None:
    chart = tmp_path / "c"
    (chart / "templates").mkdir(parents=True)
    (chart / "crds").mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 1.0.0\n")
    (chart / "values.yaml").write_text("count: 3\n")
    (chart / "crds" / "pool.yaml").write_text(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: pools.example.com\n"
        "spec:\n  group: example.com\n  scope: Cluster\n  names: {kind: Pool, plural: pools}\n"
        "  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n"
    )
    (chart / "templates" / "all.yaml").write_text(
        "{{- range $i := until (int .Values.count) }}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n"
        "  name: d-{{ $i }}\n  namespace: {{ $.Release.Namespace }}\n  labels: {i: '{{ $i }}'}\n"
        "  annotations:\n    note: |\n      kind: not-a-key\n"
        "spec:\n  selector: {matchLabels: {i: '{{ $i }}'}}\n  template:\n    metadata:\n      labels: {i: '{{ $i }}'}\n"
        "    spec:\n      containers: [{name: app, image: 'example.com/app:1'}]\n{{- end }}\n"
        "---\napiVersion: example.com/v1\nkind: Pool\nmetadata:\n  name: p\n"
    )
    helm = CmpSettings.from_env().helm_path()
    out = subprocess.run(
        [helm, "template", ".", "--name-template", "r", "--namespace", "apps", "--include-crds"],
        cwd=chart,
        env=tool_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    tier1 = _scan_helm(out, source="helm", limits=DEFAULT_LIMITS)
    assert tier1 is not None  # helm's layout took the fast tier; the slower tiers are for doubt
    assert [(d.api_version, d.kind, d.name, d.namespace) for d in tier1] == full(out)
    assert {d.source for d in tier1 if d.kind == "Deployment"} == {"c/templates/all.yaml"}
    keys = keys_of(tier1, default_namespace="apps")
    assert [str(k) for k in keys if k.kind == "Pool"] == ["Pool.example.com p"]  # cluster-scoped by the CRD
    general = _scan_general(out, source="helm", limits=DEFAULT_LIMITS)
    assert [(d.api_version, d.kind, d.name, d.namespace, d.line) for d in general] == [
        (d.api_version, d.kind, d.name, d.namespace, d.line) for d in tier1
    ]

    # one document out of helm's layout is enough doubt: the whole stream goes to tier 2
    for extra in (
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  name: x\n",
        "---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: listed}\n",
        "---\nmetadata:\n  name: metadata-first\napiVersion: v1\nkind: ConfigMap\n",
    ):
        doubtful = out + extra
        assert _scan_helm(doubtful, source="helm", limits=DEFAULT_LIMITS) is None
        assert fast(doubtful) == full(doubtful)

    # metadata's other children before its name (kustomize's order), kind before apiVersion,
    # metadata four spaces in, a document ending with its name line, a stream whose first document
    # has no "---": still helm's layout
    kustomized = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {a: b}\n  name: kustomize-order\n"
        + out
        + "---\nkind: ConfigMap\napiVersion: v1\nmetadata:\n    labels:\n      a: b\n    name: four\n"
        + "    namespace: n4\ndata:\n    k: v\n"
    )
    tier1 = _scan_helm(kustomized, source="helm", limits=DEFAULT_LIMITS)
    assert tier1 is not None
    assert [(d.api_version, d.kind, d.name, d.namespace) for d in tier1] == full(kustomized)
    assert [d.line for d in tier1] == [
        d.line for d in _scan_general(kustomized, source="helm", limits=DEFAULT_LIMITS)
    ]


# lines made of what the two finders look at: quotes, brackets, block indicators with comments
# that hold more of them, keys, items, blanks; structured lines and token soup, in any mix
_TOKENS = [
    '"',
    "'",
    "{",
    "}",
    "[",
    "]",
    "&",
    "!",
    "|",
    ">",
    "+",
    "-",
    "1",
    " ",
    "\t",
    "\r",
    "#",
    "a: ",
    "- ",
    "\\",
]
_STRUCTURED = st.tuples(
    st.sampled_from(["", "  ", "    ", "- ", "  - - "]),
    st.sampled_from(["", "key: ", "a:b: ", "'q': ", "k:"]),
    st.sampled_from(
        [
            "|",
            ">",
            "|-",
            ">+2",
            "|9",
            "",
            '"',
            "'",
            "{",
            "[",
            "&a ",
            "!t ",
            "{a: [b, {c: d}]}",
            "[x]",
            '"q"',
            "'q'",
        ]
    ),
    st.sampled_from(["", " ", "\t", "x"]),
    st.sampled_from(["", "#", " # a|b", " #>", ' # "x" [', "'\"{"]),
    st.sampled_from(["", "\r"]),
).map("".join)
_SOUP = st.lists(st.sampled_from(_TOKENS), max_size=12).map("".join)
_LINES = st.lists(st.one_of(_STRUCTURED, _SOUP), max_size=12).map("\n".join)


@given(_LINES)
def test_the_quote_line_finder_finds_what_the_pattern_finds(text: str) -> None:
    """``_quote_lines`` tries only lines with a quote character and skips lines closed on
    themselves: the same matches as finditer, less those lines."""
    nl = "\n" + text
    expect = [
        (m.start(), m.end())
        for m in scan_scalars._QUOTE_LINE.finditer(nl)
        if scan_scalars._CLOSED_LINE.match(nl, m.start()) is None
    ]
    assert [(m.start(), m.end()) for m in scan_scalars._quote_lines(nl)] == expect


@given(_LINES)
def test_a_line_skipped_as_closed_is_one_the_full_check_finds_closed(text: str) -> None:
    """What ``_CLOSED_LINE`` lets ``_quote_lines`` skip, ``_unclosed`` would have passed too."""
    nl = "\n" + text
    for m in scan_scalars._CLOSED_LINE.finditer(nl):
        assert scan_scalars._unclosed(nl[m.start() + 1 : m.end()]) == -1, nl[m.start() : m.end()]


@given(_LINES)
def test_the_block_indicator_finder_finds_what_the_pattern_finds(text: str) -> None:
    """``_block_indicators`` tries only at ``|`` and ``>``: the same matches as finditer."""
    nl = "\n" + text
    expect = [(m.start(), m.end()) for m in scan_scalars._BLOCK_INDICATOR.finditer(nl)]
    assert [(m.start(), m.end()) for m in scan_scalars._block_indicators(nl)] == expect

"""The identity scanner holds on any template layout, not one: a property test against the full parser.

Documents are generated in many layouts real charts use (keys in any order, labels before the
name, names with colons, top-level keys between kind and metadata, indentation 2 or 4, flow-style
metadata, CRDs with their scope anywhere in spec, block scalars and multi-line quoted scalars whose
lines look like keys) and the identities and CRD scopes the scanner reads are compared with what
the full parser (Go's YAML semantics, driftguard/goyaml.py) reads. And the realistic layouts are
read without parsing any document, CRDs included.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cmp_plugin.scan import keys_of, scan_stream
from driftguard.manifests import cluster_scoped_kinds, load_stream, resource_key
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

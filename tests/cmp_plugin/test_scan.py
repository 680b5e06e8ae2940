"""The fast identity scanner agrees with the full YAML parser, on plain and on odd YAML."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cmp_plugin.scan import keys_of, scan_stream
from driftguard.manifests import load_stream, resource_key

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


@settings(max_examples=300, deadline=None)
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

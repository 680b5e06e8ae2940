"""manifests.py: identity rules, flattening, and refusal of malformed, oversized and hostile input."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftguard.errors import LimitExceeded, ManifestError
from driftguard.manifests import (
    Limits,
    ResourceKey,
    cluster_scoped_kinds,
    group_of,
    load_file,
    load_stream,
    resource_key,
)

DEPLOY = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: shop
spec:
  replicas: 2
"""


def test_group_of() -> None:
    assert group_of("apps/v1") == "apps"
    assert group_of("v1") == ""
    assert group_of("networking.k8s.io/v1") == "networking.k8s.io"


def test_keys_follow_argo_rules() -> None:
    docs = load_stream(
        DEPLOY
        + "---\napiVersion: v1\nkind: Service\nmetadata: {name: api}\n"
        + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop, namespace: ignored}\n"
    )
    keys = [resource_key(d.obj, default_namespace="dest") for d in docs]
    assert keys == [
        ResourceKey("apps", "Deployment", "shop", "api"),
        ResourceKey("", "Service", "dest", "api"),
        ResourceKey("", "Namespace", "", "shop"),
    ]
    assert str(keys[0]) == "Deployment.apps shop/api"
    assert str(keys[2]) == "Namespace shop"


def test_document_lines_are_reported() -> None:
    docs = load_stream(
        "# header\n" + DEPLOY + "---\n" + DEPLOY.replace("name: api", "name: web"), source="out.yaml"
    )
    assert [d.line for d in docs] == [1, 9]
    assert docs[1].where == "out.yaml:9"


def test_list_kinds_are_flattened() -> None:
    text = """\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}
---
apiVersion: v1
kind: ConfigMapList
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
"""
    assert [d.obj["metadata"]["name"] for d in load_stream(text)] == ["a", "b", "c"]


def test_crd_in_stream_declares_cluster_scope() -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gpupools.infra.example.com"},
        "spec": {"group": "infra.example.com", "scope": "Cluster", "names": {"kind": "GPUPool"}},
    }
    pool = {
        "apiVersion": "infra.example.com/v1",
        "kind": "GPUPool",
        "metadata": {"name": "a100", "namespace": "x"},
    }
    scoped = cluster_scoped_kinds([crd, pool])
    assert resource_key(pool, cluster_scoped=scoped).namespace == ""
    assert resource_key(pool).namespace == "x"


def test_json_stream_and_array() -> None:
    one = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}'
    assert len(load_stream(one)) == 1
    assert len(load_stream("[" + one + "," + one.replace('"a"', '"b"') + "]")) == 2


def test_timestamps_stay_strings_and_empty_docs_are_skipped() -> None:
    docs = load_stream(
        "---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {d: 2024-01-02}\n...\n"
    )
    assert docs[0].obj["data"]["d"] == "2024-01-02"


def test_document_marker_with_content_on_its_line() -> None:
    docs = load_stream(
        "--- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n--- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n"
    )
    assert [d.obj["metadata"]["name"] for d in docs] == ["a", "b"]


def test_block_scalar_with_dashes_inside_is_not_split() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  x: |\n    ---\n    y\n"
    assert load_stream(text)[0].obj["data"]["x"] == "---\ny\n"


# --- bad input: a clear error naming where, never a crash --------------------------------------


def test_malformed_yaml_names_file_and_line() -> None:
    text = DEPLOY + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n"
    with pytest.raises(ManifestError) as err:
        load_stream(text, source="render.yaml")
    assert err.value.source == "render.yaml"
    assert err.value.line is not None and err.value.line >= 9
    assert "invalid YAML" in str(err.value)


def test_tab_indentation_is_reported() -> None:
    with pytest.raises(ManifestError, match="invalid YAML"):
        load_stream("apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: a\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", "must be a mapping"),
        ("just a string\n", "must be a mapping"),
        ("42\n", "must be a mapping"),
        ("kind: ConfigMap\nmetadata: {name: a}\n", "no apiVersion"),
        ("apiVersion: v1\nmetadata: {name: a}\n", "no kind"),
        ("apiVersion: v1\nkind: ConfigMap\n", "no metadata"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {labels: {}}\n", "no metadata.name"),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: [x]}\n",
            "namespace is not a string",
        ),
        ("apiVersion: v1\nkind: List\nitems: [1]\n", "not a mapping"),
    ],
)
def test_shapes_that_are_not_resources(text: str, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        load_stream(text)


def test_identity_check_can_be_relaxed_for_values_files() -> None:
    assert load_stream("enabled: true\n", require_identity=False)[0].obj == {"enabled": True}


def test_python_tags_are_refused() -> None:
    with pytest.raises(ManifestError):
        load_stream("!!python/object/apply:os.system ['true']\n")


def test_non_utf8_is_refused() -> None:
    with pytest.raises(ManifestError, match="not UTF-8"):
        load_stream(b"apiVersion: v1\nkind: \xff\xfe\n")


def test_oversized_stream_is_refused_before_parsing() -> None:
    with pytest.raises(LimitExceeded, match="over the limit"):
        load_stream(DEPLOY * 10, limits=Limits(max_bytes=100))


def test_too_many_documents() -> None:
    text = "---\n".join(DEPLOY.replace("name: api", f"name: api{i}") for i in range(20))
    with pytest.raises(LimitExceeded, match="more than 10 documents"):
        load_stream(text, limits=Limits(max_documents=10))


def test_alias_bomb_fails_fast() -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 12):
        ref = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([ref] * 9)}]")
    bomb = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\n" + "\n".join(lines) + "\n"
    # 9**12 nodes if expanded: the alias-bomb refusal is raised before any expansion
    with pytest.raises(LimitExceeded, match="alias bomb"):
        load_stream(bomb)


def test_shared_aliases_within_limits_are_fine() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: &l {app: x}}\ndata: {}\nextra: {labels: *l}\n"
    assert load_stream(text)[0].obj["extra"]["labels"] == {"app": "x"}


def test_deep_nesting_is_refused() -> None:
    deep = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: " + "[" * 200 + "]" * 200 + "\n"
    with pytest.raises(LimitExceeded, match="nesting"):
        load_stream(deep)
    block = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n" + "".join(
        "  " * i + f"k{i}:\n" for i in range(300)
    )
    with pytest.raises(LimitExceeded, match="nesting"):
        load_stream(block)


def test_flow_nesting_past_libyaml_limit_is_a_limit_error() -> None:
    with pytest.raises(LimitExceeded, match="nesting"):
        load_stream("[" * 5000 + "]" * 5000)


def test_deep_json_is_refused() -> None:
    with pytest.raises(LimitExceeded, match="nesting"):
        load_stream(
            '{"apiVersion": "v1", "kind": "C", "metadata": {"name": "a"}, "x": ' + "[" * 300 + "]" * 300 + "}"
        )


def test_load_file(tmp_path: Path) -> None:
    f = tmp_path / "d.yaml"
    f.write_text(DEPLOY)
    assert load_file(f)[0].source == str(f)
    with pytest.raises(ManifestError, match="cannot read"):
        load_file(tmp_path / "missing.yaml")
    with pytest.raises(LimitExceeded):
        load_file(f, limits=Limits(max_bytes=10))

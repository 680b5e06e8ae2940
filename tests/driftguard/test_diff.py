"""diff.py: JSON pointers, keyed lists, quantities, and the patch property."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from driftguard.diff import ListSeg, diff_objects, escape, json_patch, pointer, unescape
from tests.helpers import examples


def test_pointer_escaping_round_trips() -> None:
    assert escape("nvidia.com/gpu") == "nvidia.com~1gpu"
    assert escape("a~b") == "a~0b"
    assert unescape(escape("x/~y~1")) == "x/~y~1"


def test_gpu_limit_change_is_one_replace_with_the_drill_path() -> None:
    desired = {"spec": {"containers": [{"name": "server", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
    live = copy.deepcopy(desired)
    live["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    [change] = diff_objects(desired, live)
    assert (change.path, change.op, change.old, change.new) == (
        "/spec/containers/0/resources/limits/nvidia.com~1gpu",
        "replace",
        "2",
        "4",
    )


def test_insertion_into_a_named_list_is_one_change() -> None:
    desired = {"env": [{"name": f"V{i}", "value": str(i)} for i in range(5)]}
    live = copy.deepcopy(desired)
    live["env"].insert(0, {"name": "INJECTED", "value": "x"})
    changes = diff_objects(desired, live)
    assert [(c.op, c.path) for c in changes] == [("add", "/env/0")]
    assert jsonpatch.apply_patch(desired, json_patch(desired, live)) == live


def test_removal_from_a_named_list_uses_the_desired_index() -> None:
    desired = {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
    live = {"containers": [{"name": "a"}, {"name": "c", "image": "new"}]}
    changes = {(c.op, c.path) for c in diff_objects(desired, live)}
    assert changes == {("remove", "/containers/1"), ("add", "/containers/1/image")}
    assert jsonpatch.apply_patch(desired, json_patch(desired, live)) == live


def test_a_pure_reorder_is_one_change() -> None:
    desired = {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
    live = {"containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}
    [change] = diff_objects(desired, live)
    assert (change.path, change.old, change.new) == ("/containers", ["a", "b", "c"], ["c", "a", "b"])
    assert jsonpatch.apply_patch(desired, json_patch(desired, live)) == live


def test_ports_are_keyed_by_port_and_protocol() -> None:
    desired = {"ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 80, "protocol": "UDP"}]}
    live = {
        "ports": [
            {"containerPort": 80, "protocol": "UDP", "name": "dns"},
            {"containerPort": 80, "protocol": "TCP"},
        ]
    }
    changes = diff_objects(desired, live)
    assert ("add", "/ports/0/name") in {(c.op, c.path) for c in changes}


def test_volume_mounts_are_keyed_by_mount_path() -> None:
    desired = {"volumeMounts": [{"name": "data", "mountPath": "/a"}, {"name": "data", "mountPath": "/b"}]}
    live = {
        "volumeMounts": [
            {"name": "data", "mountPath": "/b"},
            {"name": "data", "mountPath": "/a", "readOnly": True},
        ]
    }
    paths = {c.path for c in diff_objects(desired, live)}
    assert "/volumeMounts/1/readOnly" in paths


def test_unkeyed_lists_compare_by_position() -> None:
    changes = diff_objects({"args": ["--a", "--b"]}, {"args": ["--a", "--c", "--d"]})
    assert {(c.op, c.path) for c in changes} == {("replace", "/args/1"), ("add", "/args/2")}


def test_quantities_compare_by_value() -> None:
    base = {"resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "1000m", "memory": "1Gi"}}}
    same = {"resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1", "memory": "1024Mi"}}}
    assert diff_objects(base, same) == []
    more = {"resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "1", "memory": "1024Mi"}}}
    assert [c.path for c in diff_objects(base, more)] == ["/resources/limits/nvidia.com~1gpu"]


def test_type_change_is_a_replace() -> None:
    [c] = diff_objects({"a": {"b": 1}}, {"a": [1]})
    assert (c.op, c.path) == ("replace", "/a")


def test_pointer_of_non_string_keys() -> None:
    assert pointer(["a", "b/c"]) == "/a/b~1c"
    assert diff_objects({1: "a"}, {1: "b"})[0].path == "/1"


# --- property: the patch turns desired into live --------------------------------------------------

names = st.sampled_from(["a", "b", "c", "name", "x/y", "t~o"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=3))


def values(depth: int = 3) -> st.SearchStrategy[Any]:
    if depth == 0:
        return scalars
    child = values(depth - 1)
    named_items = st.lists(
        st.fixed_dictionaries({"name": st.sampled_from(["p", "q", "r", "s"])}, optional={"v": child}),
        max_size=4,
        unique_by=lambda d: d["name"],
    )
    return st.one_of(
        scalars,
        st.lists(child, max_size=4),
        named_items,
        st.dictionaries(names, child, max_size=4),
    )


objects = st.dictionaries(names, values(), max_size=5)


@settings(max_examples=examples(400), deadline=None)
@given(objects, objects)
def test_patch_applied_to_desired_gives_live(desired: dict[str, Any], live: dict[str, Any]) -> None:
    patch = json_patch(desired, live)
    assert jsonpatch.apply_patch(copy.deepcopy(desired), patch) == live
    assert (patch == []) == (desired == live)


@settings(max_examples=examples(300), deadline=None)
@given(objects, objects)
def test_every_change_path_points_into_live(desired: dict[str, Any], live: dict[str, Any]) -> None:
    """add/replace: the pointer resolves in live to `new`; remove: its parent is in live and the field is not."""
    for change in diff_objects(desired, live):
        assert change.path == pointer(change.segments)
        node: Any = live
        *parents, last = change.segments
        for seg in parents:
            node = node[seg.index] if isinstance(seg, ListSeg) else node[seg]
        if change.op == "remove":
            if isinstance(last, ListSeg):
                assert isinstance(node, list)
                if last.key is not None:
                    assert all(
                        any(item.get(k) != v for k, v in last.key) for item in node if isinstance(item, dict)
                    )
                else:
                    assert last.index >= len(node)
            else:
                assert isinstance(node, dict) and last not in node
            continue
        value = node[last.index] if isinstance(last, ListSeg) else node[last]
        if (
            isinstance(value, list)
            and value
            and all(isinstance(i, dict) for i in value)
            and change.new == [i.get("name") for i in value if i.get("name") in change.new]
        ):
            continue  # a reorder names the list's key order, not its items
        assert value == change.new

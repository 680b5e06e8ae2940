"""Properties of codify's pieces: SPEC round-trips, and a YAML edit changes exactly one value.

The reference model of an edit is the parsed document with the value set (``set_in``, a plain
dict walk); the edited text must load to it, and a replaced scalar must leave every other line
as it was (comments, order and quoting are kept: set-image's rule).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cmp_plugin.repotools.codify_edit import edit_yaml, set_in
from cmp_plugin.repotools.codify_spec import Change, parse_change, spec_of, tokens
from driftguard.diff import escape
from driftguard.errors import InputError
from driftguard.manifests import safe_load
from tests.helpers import examples


# keys Go's YAML reads as strings (y, n, on, off, ... are booleans to it, as to helm)
def _string_key(key: str) -> bool:
    try:
        return key[0].isalpha() and list(safe_load(f"{key}: 0")) == [key]
    except yaml.YAMLError:
        return False


KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./_~", min_size=1, max_size=12).filter(
    _string_key
)
SCALAR = st.one_of(
    st.integers(-1000, 10**6),
    st.booleans(),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 .:-/#'\"", max_size=16),
)
NAME = st.from_regex(r"[a-z0-9]([-a-z0-9.:]{0,20}[a-z0-9])?", fullmatch=True)


@settings(deadline=None)  # shared machine: a slow example is not a failure
@given(
    kind=st.sampled_from(["Deployment", "ConfigMap", "ClusterRole"]),
    namespace=st.one_of(st.just(""), st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)),
    name=NAME,
    keys=st.lists(KEY, min_size=1, max_size=5),
    value=st.one_of(SCALAR, st.lists(SCALAR, max_size=3), st.dictionaries(KEY, SCALAR, max_size=3)),
)
def test_a_spec_round_trips(kind: str, namespace: str, name: str, keys: list[str], value: Any) -> None:
    pointer = "".join("/" + escape(k) for k in keys)
    change = Change(kind, namespace, name, pointer, value)
    assert parse_change(spec_of(change)) == change
    assert tokens(pointer) == keys


@pytest.mark.parametrize("bad", ["/a/~2", "a/b", "/x~"])
def test_a_bad_pointer_is_refused(bad: str) -> None:
    with pytest.raises(InputError):
        tokens(bad)


TREE = st.recursive(
    SCALAR,
    lambda inner: st.dictionaries(KEY, inner, min_size=1, max_size=4),
    max_leaves=8,
)


def _leaves(node: Any, path: list[Any]) -> list[list[Any]]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _leaves(v, [*path, k])]
    return [path] if path else []


@settings(max_examples=examples(40), deadline=None)
@given(doc=st.dictionaries(KEY, TREE, min_size=1, max_size=4), data=st.data(), value=SCALAR)
def test_replacing_a_scalar_changes_one_line(doc: dict[str, Any], data: st.DataObject, value: Any) -> None:
    text = "# kept\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)
    path = data.draw(st.sampled_from(_leaves(doc, [])))
    new = edit_yaml(text, path, value, origin="values.yaml")
    assert safe_load(new) == set_in(safe_load(text), path, value)
    old_lines, new_lines = text.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    assert sum(a != b for a, b in zip(old_lines, new_lines, strict=True)) <= 1


@settings(max_examples=examples(40), deadline=None)
@given(doc=st.dictionaries(KEY, TREE, min_size=1, max_size=4), data=st.data(), value=SCALAR)
def test_adding_a_key_keeps_every_old_line(doc: dict[str, Any], data: st.DataObject, value: Any) -> None:
    text = "# kept\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)
    maps = [[]] + [p for p in _all_maps(doc, [])]
    parent = data.draw(st.sampled_from(maps))
    extra = data.draw(st.lists(KEY, min_size=1, max_size=3))
    node: Any = doc
    for k in parent:
        node = node[k]
    if extra[0] in node:
        return
    path = [*parent, *extra]
    new = edit_yaml(text, path, value, origin="values.yaml")
    assert safe_load(new) == set_in(safe_load(text), path, value)
    kept = iter(new.splitlines())
    assert all(any(line == n for n in kept) for line in text.splitlines())  # old lines, in order


def _all_maps(node: Any, path: list[Any]) -> list[list[Any]]:
    out = []
    if isinstance(node, dict):
        if path:
            out.append(path)
        for k, v in node.items():
            out += _all_maps(v, [*path, k])
    return out


def test_quoting_and_comments_are_kept() -> None:
    text = "a:\n  b: '2' # two\n  c: \"x\"\nd: [1, 2]\n"
    assert edit_yaml(text, ["a", "b"], "4") == "a:\n  b: '4' # two\n  c: \"x\"\nd: [1, 2]\n"
    assert edit_yaml(text, ["a", "c"], "y: z") == "a:\n  b: '2' # two\n  c: \"y: z\"\nd: [1, 2]\n"
    assert json.loads(json.dumps(safe_load(edit_yaml(text, ["d", 1], 3)))) == {
        "a": {"b": "2", "c": "x"},
        "d": [1, 3],
    }

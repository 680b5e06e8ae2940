"""driftguard reads YAML as Argo CD does: go-yaml v2's typing, then sigs.k8s.io/yaml's JSON step.

Every expected value below comes from upstream, not from running PyYAML:
- ``GOYAML``: go-yaml v2.4.0 ``decode_test.go`` (``unmarshalTests``, decoding into
  ``map[string]interface{}``; ``mergeTests``), the base of ``go.yaml.in/yaml/v2`` that
  sigs.k8s.io/yaml uses;
- ``SIGS``: sigs.k8s.io/yaml v1.6.0 ``yaml_test.go`` (``TestYAMLToJSON``), the JSON Argo CD's
  ``kube.SplitYAML`` (gitops-engine/pkg/utils/kube/kube.go in argo-cd v3.5.1) gets;
- ``RESOLVE``: cases go-yaml v2.4.0 ``resolve.go`` decides by its documented rules (first
  character hint, the bool/null word table, ``strconv.ParseInt(s, 0, 64)`` after dropping "_",
  ``yamlStyleFloat``) and ``decode.go`` (timestamps into ``interface{}`` stay strings; merge
  keys applied in order), then encoding/json + apimachinery's number decoding (an integral
  float comes back an int64, a uint64 beyond int64 a float64, NaN/Inf are unsupported values).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from driftguard.errors import LimitExceeded, ManifestError
from driftguard.goyaml import go_plain_is_string
from driftguard.manifests import load_stream, safe_load

GOYAML, SIGS, RESOLVE = "go-yaml v2.4.0 decode_test.go", "sigs.k8s.io/yaml v1.6.0 yaml_test.go", "resolve.go"

CASES: list[tuple[str, str, Any]] = [
    (GOYAML, "v: hi", {"v": "hi"}),
    (GOYAML, "v: 0b10", {"v": 2}),
    (GOYAML, "v: 0xA", {"v": 10}),
    (GOYAML, "v: .1", {"v": 0.1}),
    (GOYAML, "v: -10", {"v": -10}),
    (GOYAML, "v: -.1", {"v": -0.1}),
    (GOYAML, "canonical: 6.8523e+5", {"canonical": 685230}),  # float 685230.0 -> JSON 685230 -> int64
    (GOYAML, "expo: 685.230_15e+03", {"expo": 685230.15}),
    (GOYAML, "fixed: 685_230.15", {"fixed": 685230.15}),
    (GOYAML, "canonical: y", {"canonical": True}),
    (GOYAML, "answer: NO", {"answer": False}),
    (GOYAML, "logical: True", {"logical": True}),
    (GOYAML, "option: on", {"option": True}),
    (GOYAML, "decimal: +685_230", {"decimal": 685230}),
    (GOYAML, "octal: 02472256", {"octal": 685230}),
    (GOYAML, "hexa: 0x_0A_74_AE", {"hexa": 685230}),
    (GOYAML, "bin: 0b1010_0111_0100_1010_1110", {"bin": 685230}),
    (GOYAML, "bin: -0b101010", {"bin": -42}),
    (GOYAML, "bin: -0b" + "1" + "0" * 63, {"bin": -(1 << 63)}),
    (GOYAML, "empty:", {"empty": None}),
    (GOYAML, "canonical: ~", {"canonical": None}),
    (GOYAML, "english: null", {"english": None}),
    (GOYAML, "a: -b_c", {"a": "-b_c"}),
    (GOYAML, "a: +b_c", {"a": "+b_c"}),
    (GOYAML, "a: 50cent_of_dollar", {"a": "50cent_of_dollar"}),
    (GOYAML, "a: 1:1", {"a": "1:1"}),  # base 60 is unsupported: a string (PyYAML: 61)
    (GOYAML, "a: 2015-01-01", {"a": "2015-01-01"}),  # implicit timestamp into interface{}
    (GOYAML, 'a: !!timestamp "2015-01-01"', {"a": "2015-01-01"}),
    (GOYAML, "a: !!str 2015-01-01", {"a": "2015-01-01"}),
    (GOYAML, "_: !!foo 'BAR!'", {"_": "BAR!"}),  # an unknown tag is ignored
    (SIGS, "t: True", {"t": True}),
    (SIGS, "t: no", {"t": False}),
    (SIGS, "t: 9007199254740993", {"t": 9007199254740993}),
    (SIGS, "t: 1000000000000000000000000000000000000", {"t": 1e36}),
    (SIGS, "t: ", {"t": None}),
    (SIGS, "True: a", {"true": "a"}),
    (SIGS, "no: a", {"false": "a"}),
    (SIGS, "1: a", {"1": "a"}),
    (SIGS, "1.2: a", {"1.2": "a"}),
    (SIGS, "1e+36: a", {"1e+36": "a"}),
    (SIGS, '"1e+36": a', {"1e+36": "a"}),
    (SIGS, "a: !!binary gIGC", {"a": "\ufffd\ufffd\ufffd"}),
    (SIGS, "[{t: a}, {t: {b: 1, c: 2}}]", [{"t": "a"}, {"t": {"b": 1, "c": 2}}]),
    (RESOLVE, "enum: [=, '=', <, '>=']", {"enum": ["=", "=", "<", ">="]}),  # PyYAML: !!value, no constructor
    (RESOLVE, "a: [n, N, Y, yes, Off, ON]", {"a": [False, False, True, True, False, True]}),
    (RESOLVE, "a: [0777, '0777', 0o17, 0O17, 0x1f, -0x1F]", {"a": [511, "0777", 15, 15, 31, -31]}),
    (RESOLVE, "a: [08, 09.5, 0b2, 0x, 1_000, 1__0]", {"a": [8, 9.5, "0b2", "0x", 1000, 10]}),
    (RESOLVE, "a: [1e3, 1E-7, 1., 1.0, -0.0, .5e1, ., -, +]", {"a": [1000, 1e-7, 1, 1, 0, 5, ".", "-", "+"]}),
    (RESOLVE, "a: [22:22, 1:30:00, 8080:80]", {"a": ["22:22", "1:30:00", "8080:80"]}),  # PyYAML: 1342, 5400
    (
        RESOLVE,
        "a: [2001-12-14 21:59:43.10 -5, 2001-12-14t21:59:43.10-05:00]",
        {"a": ["2001-12-14 21:59:43.10 -5", "2001-12-14t21:59:43.10-05:00"]},
    ),
    (
        RESOLVE,
        "a: [9223372036854775807, 9223372036854775808, 18446744073709551615]",
        {"a": [(1 << 63) - 1, float(1 << 63), float((1 << 64) - 1)]},
    ),
    (RESOLVE, "a: [!!int '7', !!float 1, !!float 1.5, !!bool 'yes', !!str 1]", {"a": [7, 1, 1.5, True, "1"]}),
    (RESOLVE, "a: [nan, NaN, .inf_, inf]", {"a": ["nan", "NaN", ".inf_", "inf"]}),  # not in the word table
    (RESOLVE, "{on: push, y: 1, n: 0, ~x: 1}", {"true": 1, "false": 0, "~x": 1}),  # on and y: the same key
    (
        RESOLVE,
        "{0x10: a, 010: b, 1.0: c, 1e6: d, 0.00001: e}",
        {"16": "a", "8": "b", "1": "c", "1e+06": "d", "1e-05": "e"},
    ),
    (RESOLVE, "a: !!set {x, y}", {"a": {"x": None, "true": None}}),
    (RESOLVE, "a: !Ref b\nc: !GetAtt [d, e]\nf: !Sub {g: h}", {"a": "b", "c": ["d", "e"], "f": {"g": "h"}}),
    (
        RESOLVE,
        "x: {a: 0, <<: {a: 1, b: 1}, b: 2}",
        {"x": {"a": 1, "b": 2}},
    ),  # a merge overrides what is before it
    (RESOLVE, "x: {<<: [{a: 1}, {a: 2, c: 3}]}", {"x": {"a": 1, "c": 3}}),  # the earlier mapping wins
    (RESOLVE, "x: {'<<': 1, q: <<}", {"x": {"<<": 1, "q": "<<"}}),  # a quoted "<<" is no merge
]


@pytest.mark.parametrize(("origin", "text", "expected"), CASES, ids=[c[1][:40] for c in CASES])
def test_scalars_keys_and_merges_as_argo_cd_reads_them(origin: str, text: str, expected: Any) -> None:
    got = safe_load(text)
    assert got == expected, origin
    assert _types(got) == _types(expected), origin  # True is not 1, 1 is not 1.0


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value).__name__


def test_dot_nan_words() -> None:
    # resolve.go's table has .nan/.NaN/.NAN and .inf: a float Go's encoding/json cannot write
    for word in (".nan", ".NaN", ".NAN", ".inf", "-.Inf", "+.INF"):
        with pytest.raises(yaml.YAMLError, match="not representable in JSON"):
            safe_load(f"a: {word}")


GO_MERGE_TESTS = """
anchors:
  list:
    - &CENTER { "x": 1, "y": 2 }
    - &LEFT   { "x": 0, "y": 2 }
    - &BIG    { "r": 10 }
    - &SMALL  { "r": 1 }
plain: {"x": 1, "y": 2, "r": 10, label: center/big}
mergeOne: {<< : *CENTER, "r": 10, label: center/big}
mergeMultiple: {<< : [ *CENTER, *BIG ], label: center/big}
override: {<< : [ *BIG, *LEFT, *SMALL ], "x": 1, label: center/big}
shortTag: {!!merge "<<" : [ *CENTER, *BIG ], label: center/big}
longTag: {!<tag:yaml.org,2002:merge> "<<" : [ *CENTER, *BIG ], label: center/big}
inlineMap: {<< : {"x": 1, "y": 2, "r": 10}, label: center/big}
inlineSequenceMap: {<< : [ *CENTER, {"r": 10} ], label: center/big}
"""


def test_go_yaml_merge_tests() -> None:
    doc = safe_load(GO_MERGE_TESTS)
    want = {"x": 1, "y": 2, "r": 10, "label": "center/big"}
    for name, value in doc.items():
        if name != "anchors":
            assert value == want, name


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("~: a", "null"),  # SIGS: "~ key" and "null key" are errors
        ("null: a", "null"),
        ("? [1]\n: 2", "invalid map key"),
        ("a: !!int x", "cannot decode !!str `x` as a !!int"),
        ("a: {<<: 1}", "map merge requires map or sequence of maps"),
        ("a: !!binary '%%%'", "invalid base64"),
    ],
)
def test_what_go_refuses_is_refused(text: str, message: str) -> None:
    with pytest.raises(yaml.YAMLError, match=message):
        safe_load(text)
    with pytest.raises(ManifestError, match=message):
        load_stream(text, require_identity=False)


def test_the_prometheus_operator_enum_loads() -> None:
    crd = (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: alertmanagerconfigs.monitoring.coreos.com}\n"
        "spec:\n  versions:\n  - schema:\n      openAPIV3Schema:\n        properties:\n"
        "          matchType:\n            enum:\n            - '!='\n            - =\n            - =~\n            - '!~'\n"
    )
    (doc,) = load_stream(crd)
    enum = doc.obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["matchType"]["enum"]
    assert enum == ["!=", "=", "=~", "!~"]


def test_json_documents_get_the_same_numbers() -> None:
    (doc,) = load_stream(
        '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "n": [1.0, 2.5, 1e3]}'
    )
    assert doc.obj["n"] == [1, 2.5, 1000] and [type(v) for v in doc.obj["n"]] == [int, float, int]


def test_merge_keys_cannot_multiply() -> None:
    # every level merges the previous one twice: 2**40 pairs if merges were expanded naively
    lines = ["l0: &l0 {k: v}"] + [f"l{i}: &l{i} {{<<: [*l{i - 1}, *l{i - 1}]}}" for i in range(1, 41)]
    doc = safe_load("\n".join(lines))
    assert doc["l40"] == {"k": "v"}


def test_alias_bomb_still_fails_on_the_budget() -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        lines.append(f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [{','.join(['*' + prev] * 10)}]")
    with pytest.raises(LimitExceeded, match="alias bomb"):
        load_stream("\n".join(lines), require_identity=False)


@pytest.mark.parametrize(
    ("text", "is_string"),
    [
        ("web", True),
        ("=", True),
        ("y", False),
        ("08", False),
        ("0o17", False),
        ("1:30", True),
        ("2048-game", True),
        ("1password", True),
        ("1e3", False),
        (".5", False),
        ("+", True),
    ],
)
def test_the_scanner_uses_the_same_rule(text: str, is_string: bool) -> None:
    assert go_plain_is_string(text) is is_string
    assert isinstance(safe_load(f"v: {text}")["v"], str) is is_string

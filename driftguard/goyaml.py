"""YAML read the way Argo CD reads it: go-yaml v2 typing, then a JSON round trip.

Argo CD splits a render with gitops-engine's ``kube.SplitYAML`` (gitops-engine/pkg/utils/kube/
kube.go in argo-cd v3.5.1): apimachinery's YAML-or-JSON decoder and ``sigs.k8s.io/yaml``, which
decodes each document with go-yaml v2 (``go.yaml.in/yaml/v2``, a fork of go-yaml v2.4.0) into
``interface{}``, converts it to JSON (``yaml.go``, ``convertToJSONableObject``) and decodes that
into an ``unstructured.Unstructured``. PyYAML implements YAML 1.1 and differs from that chain in
ways that matter to real charts (the prometheus-operator CRDs' ``- =`` enum item is PyYAML's
``!!value`` tag and fails to load at all). This module keeps libyaml's parser (fast, and the
same grammar: go-yaml is a port of libyaml) and replaces what PyYAML adds on top:

- plain scalars are typed by go-yaml v2's ``resolve`` (resolve.go, v2.4.0): ``y``/``n``/``yes``/
  ``on``/``off`` are booleans; ``=`` and base-60 ``1:30`` are strings; ``0777`` and ``0o17`` are
  octal, ``0x1F`` hex, ``0b101`` binary; ``1e3`` and ``08`` are floats; underscores in numbers are
  dropped; timestamps stay strings (decode.go keeps ``interface{}`` timestamps as strings);
- numbers then go through JSON as Go's ``encoding/json`` writes them and apimachinery reads them
  back: an integral float is an integer (``1.0`` -> ``1``), an integer beyond int64 a float,
  and ``.nan`` / ``.inf`` make the document fail (``json: unsupported value``), as in Argo CD;
- mapping keys become strings as ``convertToJSONableObject`` makes them (``yes:`` -> ``"true"``,
  ``1:`` -> ``"1"``, floats in float32 ``%g``); a null or a collection as a key is an error;
- merge keys (``<<``) apply where they stand, in order, as go-yaml v2's ``mapping``/``merge`` do:
  a key after the merge overrides it, a key before it is overridden; of a merged sequence the
  earlier mapping wins;
- tags: ``!!str``/``!!int``/``!!float``/``!!bool``/``!!null`` re-type with go-yaml's rules,
  ``!!binary`` decodes base64, anything else (``!!set``, ``!!omap``, ``!Ref``) is ignored and
  the node read as plain data.
"""

from __future__ import annotations

import math
import re
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml
    from yaml.nodes import MappingNode, Node

__all__ = ["go_loader", "go_plain_is_string", "go_resolve"]

_P = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = _P + "str", _P + "int", _P + "float", _P + "bool", _P + "null"
MERGE, BINARY, TIMESTAMP = _P + "merge", _P + "binary", _P + "timestamp"

# go-yaml v2 resolve.go: the first character decides what a plain scalar may be
_HINT = {c: "D" for c in "0123456789"} | {"+": "S", "-": "S", ".": "."} | {c: "M" for c in "yYnNtTfFoO~"}
_WORDS: dict[str, tuple[str, Any]] = {}
for _tag, _value, _words in (
    (BOOL, True, "y Y yes Yes YES true True TRUE on On ON"),
    (BOOL, False, "n N no No NO false False FALSE off Off OFF"),
    (NULL, None, "~ null Null NULL"),
    (FLOAT, math.nan, ".nan .NaN .NAN"),
    (FLOAT, math.inf, ".inf .Inf .INF +.inf +.Inf +.INF"),
    (FLOAT, -math.inf, "-.inf -.Inf -.INF"),
):
    for _word in _words.split():
        _WORDS[_word] = (_tag, _value)
_WORDS[""] = (NULL, None)

# strconv.ParseInt(s, 0, 64) / ParseUint on an underscore-free string: sign, then 0b / 0o / 0x /
# a leading 0 (octal) or decimal digits
_GO_INT = re.compile(r"([-+]?)(?:0[bB]([01]+)|0[oO]([0-7]+)|0[xX]([0-9a-fA-F]+)|0([0-7]*)|([1-9][0-9]*))")
_GO_BASES = (2, 8, 16, 8, 10)
# resolve.go's yamlStyleFloat
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")  # what ParseFloat accepts after a leading "."
_TIMESTAMP_HEAD = re.compile(r"[0-9]{4}-")
_INT64 = 1 << 63


def _parse_int(plain: str, *, signed: bool) -> int | None:
    m = _GO_INT.fullmatch(plain)
    if m is None or (m.group(1) and not signed):
        return None
    for i, base in enumerate(_GO_BASES, start=2):
        digits = m.group(i)
        if digits is not None:
            value = int(digits or "0", base)
            break
    if m.group(1) == "-":
        value = -value
    if signed:
        return value if -_INT64 <= value < _INT64 else None
    return value if 0 <= value < 2 * _INT64 else None


def _parse_float(text: str, pattern: re.Pattern[str]) -> float | None:
    if pattern.fullmatch(text) is None:
        return None
    value = float(text)
    return None if math.isinf(value) else value  # ParseFloat: out of range is an error


def go_resolve(text: str) -> tuple[str, Any]:
    """(tag, value) of a plain scalar as go-yaml v2's ``resolve`` types it (before the JSON step)."""
    hint = _HINT.get(text[:1]) if text else "M"
    if hint is None:
        return STR, text
    word = _WORDS.get(text)
    if word is not None:
        return word
    if hint == ".":
        value = _parse_float(text, _DOT_FLOAT)
        return (FLOAT, value) if value is not None else (STR, text)
    if hint == "M":
        return STR, text
    if _TIMESTAMP_HEAD.match(text):
        return STR, text  # a timestamp (kept as its text), or nothing else a number could be
    if text.isascii() and text.isdigit() and (text[0] != "0" or len(text) == 1) and len(text) < 19:
        return INT, int(text)  # the common case: a plain decimal within int64
    plain = text.replace("_", "")
    number = _parse_int(plain, signed=True)
    if number is None:
        number = _parse_int(plain, signed=False)
    if number is not None:
        return INT, number
    value = _parse_float(plain, _YAML_STYLE_FLOAT)
    if value is not None:
        return FLOAT, value
    for prefix, sign in (("0b", ""), ("-0b", "-")):
        if plain.startswith(prefix):  # resolve.go's own 0b branch: ParseInt(rest, 2, 64)
            rest = plain[len(prefix) :]
            m = re.fullmatch(r"([-+]?)([01]+)", rest)
            if m:
                value_int = int(m.group(2), 2) * (-1 if (sign == "-") != (m.group(1) == "-") else 1)
                if -_INT64 <= value_int < _INT64:
                    return INT, value_int
            break
    return STR, text


def go_plain_is_string(text: str) -> bool:
    """Whether go-yaml v2 reads the plain scalar ``text`` as the string ``text``."""
    return go_resolve(text)[0] == STR


def _error(message: str, node: Node) -> Exception:
    from yaml.constructor import ConstructorError

    return ConstructorError(None, None, message, node.start_mark)


def _json_number(value: Any, node: Node) -> Any:
    """What a Go number is after encoding/json writes it and apimachinery reads it back."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -_INT64 <= value < _INT64 else float(value)
    if math.isnan(value) or math.isinf(value):
        raise _error(f"{node.value} is not representable in JSON (Argo CD fails on it too)", node)
    if value.is_integer() and -_INT64 <= value < _INT64:
        return int(value)
    return value


def _typed(tag: str, text: str, node: Node) -> Any:
    """go-yaml v2's value for ``text`` under the bool/int/float/null ``tag`` (implicit or explicit)."""
    got, value = go_resolve(text)
    if got != tag:
        if tag == FLOAT and got == INT:
            value = float(value)
        else:
            short = {STR: "!!str", INT: "!!int", FLOAT: "!!float", BOOL: "!!bool", NULL: "!!null"}
            raise _error(f"cannot decode {short.get(got, got)} `{text}` as a {short.get(tag, tag)}", node)
    return value


def _float32_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32): the shortest digits that read back as the float32."""
    import struct

    if math.isnan(value):
        return ".nan"
    if abs(value) > 3.4028234663852886e38:
        return ".inf" if value > 0 else "-.inf"
    f32 = struct.unpack("f", struct.pack("f", value))[0]
    if f32 == 0:
        return "-0" if math.copysign(1, f32) < 0 else "0"
    for digits in range(1, 10):
        text = f"{abs(f32):.{digits - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == abs(f32):
            break
    mantissa, _, exp_text = text.partition("e")
    exp = int(exp_text)
    ds = mantissa.replace(".", "").rstrip("0") or "0"
    sign = "-" if f32 < 0 else ""
    if exp < -4 or exp >= 6:  # shortest %g switches to %e outside [1e-4, 1e6)
        rest = f".{ds[1:]}" if len(ds) > 1 else ""
        return f"{sign}{ds[0]}{rest}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    dp = exp + 1
    if dp <= 0:
        return f"{sign}0.{'0' * -dp}{ds}"
    if dp >= len(ds):
        return f"{sign}{ds}{'0' * (dp - len(ds))}"
    return f"{sign}{ds[:dp]}.{ds[dp:]}"


def _key(node: Node) -> str:
    """A mapping key as sigs.k8s.io/yaml's convertToJSONableObject turns it into a JSON key."""
    if node.id != "scalar":  # type: ignore[attr-defined]
        raise _error("invalid map key: a mapping or sequence", node)
    tag, text = node.tag, str(node.value)
    if tag == STR:
        return text
    if tag in (INT, FLOAT, BOOL, NULL):
        value = _typed(tag, text, node)
        if value is None:
            raise _error("unsupported map key: null", node)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            if value >= _INT64:
                raise _error(f"unsupported map key of type uint64: {text}", node)
            return str(value)
        return _float32_g(value)
    if tag == BINARY:
        return _binary(node)
    return text  # timestamps, unknown tags: the text


def _binary(node: Node) -> str:
    import base64
    import binascii

    try:
        data = base64.b64decode("".join(str(node.value).split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _error(f"!!binary value contains invalid base64 data: {exc}", node) from exc
    return data.decode("utf-8", "replace")  # encoding/json replaces invalid UTF-8 the same way


def _dedupe(pairs: list[tuple[Node, Node]]) -> list[tuple[Node, Node]]:
    """Keep the last of pairs with the same scalar key: same result, and merges cannot multiply."""
    seen: set[tuple[str, str]] = set()
    out: list[tuple[Node, Node]] = []
    for k, v in reversed(pairs):
        if k.id == "scalar":  # type: ignore[attr-defined]
            ident = (k.tag, k.value)
            if ident in seen:
                continue
            seen.add(ident)
        out.append((k, v))
    out.reverse()
    return out


@cache
def go_loader() -> type[yaml.SafeLoader]:
    """The loader class, built on first use (importing yaml costs ~10 ms the fast scanner never needs)."""
    import yaml
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[valid-type,misc]
        """libyaml's parser with go-yaml v2's typing and sigs.k8s.io/yaml's JSON step."""

        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            if kind is ScalarNode and implicit[0]:
                # go-yaml's resolve reads "<<" as a string; its mapping decoder (decode.go,
                # isMerge) takes a plain "<<" key as a merge: the merge tag marks that here
                return MERGE if value == "<<" else go_resolve(value)[0]
            return str(super().resolve(kind, value, implicit))

        def flatten_mapping(self, node: MappingNode) -> None:
            if not any(k.tag == MERGE and isinstance(k, ScalarNode) for k, _ in node.value):
                return
            pairs: list[tuple[Node, Node]] = []
            for key, value in node.value:
                if key.tag != MERGE:
                    pairs.append((key, value))
                    continue
                subs = list(reversed(value.value)) if isinstance(value, SequenceNode) else [value]
                for sub in subs:  # of a merged sequence, the earlier mapping wins
                    if not isinstance(sub, MappingNode):
                        raise _error("map merge requires map or sequence of maps as the value", sub)
                    self.flatten_mapping(sub)
                    pairs.extend(sub.value)
            node.value = _dedupe(pairs)

        def construct_mapping(self, node: Node, deep: bool = False) -> dict[str, Any]:
            if not isinstance(node, MappingNode):
                raise _error(f"expected a mapping node, but found {node.id}", node)  # type: ignore[attr-defined]
            self.flatten_mapping(node)
            return {_key(k): self.construct_object(v, deep=deep) for k, v in node.value}

    def typed(loader: Loader, node: Node) -> Any:
        return _json_number(_typed(node.tag, loader.construct_scalar(node), node), node)

    def untagged(loader: Loader, suffix: str, node: Node) -> Any:
        if isinstance(node, MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    for tag in (INT, FLOAT, BOOL, NULL):
        Loader.add_constructor(tag, typed)
    Loader.add_constructor(BINARY, lambda loader, node: _binary(node))
    for tag in (TIMESTAMP, MERGE, _P + "set", _P + "omap", _P + "pairs"):
        Loader.add_constructor(tag, lambda loader, node: untagged(loader, "", node))
    Loader.add_multi_constructor("", untagged)
    return Loader

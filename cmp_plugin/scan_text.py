"""What every tier of the scanner reads the same way: plain scalars, top-level keys, document ends.

The lowest module of the scanner (scan.py, scan_docs.py, scan_scalars.py); its names stay private
to them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from driftguard.goyaml import go_plain_is_string
from driftguard.manifests import group_of

# the words go-yaml v2 (Argo CD's YAML; driftguard/goyaml.py) reads as booleans or null, not strings
_YAML_WORDS_LIST = (
    "true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes", "YES", "no", "No", "NO",
    "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "y", "Y", "n", "N",
)  # fmt: skip

_PLAIN_BAD_START = set("&*!|>{[%@`'\"?,-#")
# a document-end marker, and what may follow it up to the next "---": blank lines, comments and
# more markers (anything else is an error for the parser: "did not find expected <document start>")
_DOC_END = re.compile(r"\n\.\.\.(?=[ \t\r\n]|$)")
_AFTER_END = re.compile(r"(?:(?:\.\.\.(?=[ \t\r\n]|\Z))?[ \t]*+(?:#[^\n]*+)?\r?+(?:\n|\Z))*+")
# the next column-0 line that is not a comment, searched from the newline before a line: anchored
# on "\n", so the engine jumps from newline to newline (a ``^`` in MULTILINE mode is tried at every
# character: 8 ms for a 1.4 MB CRD where this takes a fraction of one)
_NEXT_TOP = re.compile(r"\n(?=[^ \r\n#])")
_FIRST_CHILD = re.compile(r"^( +)(?=[^ \r\n#])", re.M)


def _identity2(top: dict[str, tuple[str, int]], meta: dict[str, str]) -> Any:
    """The identity when metadata's children were read by the stream-wide passes (``_children``)."""
    head = _api_kind(top["metadata"], top)
    return None if head is None else _with_meta(*head, meta.items())


def _api_kind(meta_top: tuple[str, int] | None, top: dict[str, tuple[str, int]]) -> tuple[str, str] | None:
    """(apiVersion, kind) when metadata is a block and the kind is one the scanner may read."""
    if meta_top is None or (meta_top[0] and not meta_top[0].startswith("#")):
        return None
    api, kind = _scalar(top.get("apiVersion", ("", 0))[0]), _scalar(top.get("kind", ("", 0))[0])
    if not api or not kind or kind.endswith("List"):
        return None
    if kind == "CustomResourceDefinition" and group_of(api) != "apiextensions.k8s.io":
        return None  # not the CRD kind cluster_scoped_kinds reads: leave it to the parser
    return api, kind


def _with_meta(api: str, kind: str, pairs: Iterable[tuple[str, str]]) -> Any:
    """(apiVersion, kind, name, namespace) from metadata's identity keys; None when only a parser can say."""
    meta: dict[str, str] = {}
    for key, raw in pairs:
        value = _scalar(raw)
        if value is None or key in meta:
            return None
        meta[key] = value
    name = meta.get("name") or meta.get("generateName")
    if not name:
        return None
    return api, kind, name, meta.get("namespace", ""), bool(meta.get("name"))


_PLAIN_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9._/-]*")
_YAML_WORDS = frozenset(_YAML_WORDS_LIST)


def _scalar(rest: str | None) -> str | None:
    """The string value of a simple scalar, or None when only a parser can say."""
    if rest is None:
        return None
    if _PLAIN_WORD.fullmatch(rest) and rest not in _YAML_WORDS:
        return rest  # the common case: apps/v1, Deployment, payment-api
    value = rest.strip()
    if " #" in value:
        value = value.split(" #", 1)[0].rstrip()
    if not value:
        return None
    if value[0] == '"':
        if len(value) >= 2 and value[-1] == '"' and "\\" not in value and '"' not in value[1:-1]:
            return value[1:-1]
        return None
    if value[0] == "'":
        if len(value) >= 2 and value[-1] == "'" and "'" not in value[1:-1]:
            return value[1:-1]
        return None
    if value[0] in _PLAIN_BAD_START or ": " in value or value.endswith(":") or not go_plain_is_string(value):
        return None
    return value

"""A chart's ``values.schema.json`` may only refer inside itself (``"$ref": "#/..."``).

helm validates values against every ``values.schema.json`` of the chart and its subcharts, and
helm 3.17's JSON-schema loader (gojsonschema) follows a ``$ref`` (or an ``$id`` base) to
``file:///any/path`` and to ``http(s)://`` URLs: tested, a schema of ``{"$ref":
"file:///outside.json"}`` made helm read that file and print its ``enum`` in the validation error,
and an ``http://`` ref made the sidecar send a GET to any address it can reach. Nothing in
Argo CD stops it (the repo-server hands the chart to helm as it is), so driftguard refuses such a
schema before helm starts: a reference that is not a fragment of the same document is refused,
in the chart's directories and inside vendored subchart archives (``charts/*.tgz``).
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path
from typing import IO, Any

from driftguard.errors import InputError

__all__ = ["check_chart_schemas"]

SCHEMA = "values.schema.json"
MAX_SCHEMA_BYTES = 4 << 20
"""A schema larger than this is refused unread (helm reads it whole)."""
MAX_ARCHIVE_DEPTH = 4
"""Subchart archives inside subchart archives, at most this deep."""

_REF_KEYS = ("$ref", "$id", "id", "$dynamicRef", "$recursiveRef")
_NAME_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies")
_DATA_KEYS = ("enum", "const", "default", "examples")


def check_chart_schemas(chart_dir: Path, root: str) -> None:
    """Every values.schema.json the chart brings (directories and charts/*.tgz) refers only to itself.

    Symlinked directories are followed as helm follows them (confine.check_tree has already refused
    any that leave the checkout), each real directory once.
    """
    seen: set[str] = set()
    stack = [Path(os.path.realpath(chart_dir))]
    while stack:
        here = stack.pop()
        if str(here) in seen:
            continue
        seen.add(str(here))
        try:
            entries = sorted(here.iterdir())
        except OSError:
            continue
        for path in entries:
            if path.is_dir():
                if path.name != ".git":
                    stack.append(Path(os.path.realpath(path)))
                continue
            origin = os.path.relpath(path, root)
            if path.name == SCHEMA:
                with path.open("rb") as f:
                    _check_text(f.read(MAX_SCHEMA_BYTES + 1), origin)
            elif path.name.endswith(".tgz") and here.name == "charts":
                with path.open("rb") as f:
                    _check_archive(f, origin, depth=1)


def _check_archive(fileobj: IO[bytes], origin: str, *, depth: int) -> None:
    if depth > MAX_ARCHIVE_DEPTH:
        raise InputError(f"{origin}: subchart archives nested more than {MAX_ARCHIVE_DEPTH} deep")
    try:
        with tarfile.open(fileobj=fileobj, mode="r:*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                base = member.name.rsplit("/", 1)[-1]
                parent = member.name.rsplit("/", 2)[-2] if member.name.count("/") >= 1 else ""
                if base == SCHEMA or (base.endswith(".tgz") and parent == "charts"):
                    data = tar.extractfile(member)
                    if data is None:
                        continue
                    where = f"{origin}:{member.name}"
                    if base == SCHEMA:
                        _check_text(data.read(MAX_SCHEMA_BYTES + 1), where)
                    else:
                        _check_archive(data, where, depth=depth + 1)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(f"{origin} is not a readable chart archive: {exc}") from exc


def _check_text(data: bytes, origin: str) -> None:
    if len(data) > MAX_SCHEMA_BYTES:
        raise InputError(f"{origin} is larger than {MAX_SCHEMA_BYTES} bytes")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return  # helm refuses a schema that is not JSON on its own, reading nothing else
    bad = _outside_ref(doc)
    if bad is not None:
        raise InputError(
            f"{origin}: {bad[0]} {bad[1][:200]!r} refers outside the schema; a chart's values schema may "
            'only refer to its own definitions ("#/...")'
        )


def _outside_ref(doc: Any) -> tuple[str, str] | None:
    """The first (keyword, value) naming another document, walked without recursion (deep JSON)."""
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        node, names = stack.pop()
        if isinstance(node, list):
            stack.extend((item, False) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if names:  # the keys of "properties" etc. are property names; their values are schemas
                stack.append((value, False))
                continue
            if key in _REF_KEYS and isinstance(value, str) and value and not value.startswith("#"):
                return key, value
            if key in _DATA_KEYS:
                continue  # values, not schemas
            stack.append((value, key in _NAME_MAPS))
    return None

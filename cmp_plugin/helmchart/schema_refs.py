"""A chart's ``values.schema.json`` may only refer inside itself; identifiers are no references.

helm validates values against every ``values.schema.json`` of the chart and its subcharts, and
helm 4's schema compiler (santhosh-tekuri/jsonschema v6 with helm's loaders: helm v4.2.3
pkg/chart/common/util/jsonschema.go) loads ``file://`` and ``http(s)://`` URLs: measured with the
real binary, a ``$ref`` (or ``$dynamicRef``) that resolves to another document is fetched (a
``file:///etc/...`` ref printed the file's parse error, an ``http://`` ref made the sidecar send a
GET), and so is a ``$schema`` naming a metaschema the validator does not know. Nothing in Argo CD
stops it (the repo-server hands the chart to helm as it is), so driftguard refuses such a schema
before helm starts, in the chart's directories and inside vendored subchart archives
(``charts/*.tgz``). What is refused, and only that:

- ``$ref``, ``$dynamicRef``, ``$recursiveRef`` whose target, resolved against the base URI where
  it stands (``file:///values.schema.json``, moved by each ``$id``), is not a resource the
  document declares itself (its root or an embedded ``$id``); a fragment (``#...``) is always
  inside; ``urn:`` targets are never fetched (helm answers them with an empty schema);
- ``$schema`` naming anything but the drafts the validator has built in (draft-04, -06, -07,
  2019-09, 2020-12 and ``json-schema.org/schema``, over http or https, with at most an empty
  fragment: the library's ``draftFromURL``).

``$id`` (and draft-04's ``id``), ``$anchor``, ``$dynamicAnchor`` and ``$vocabulary`` are
identifiers: they fetch nothing (an ``$id`` of ``https://traefik.io/...`` only names the schema).
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

_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
_NAME_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies")
_DATA_KEYS = ("enum", "const", "default", "examples")
ROOT_URI = "file:///values.schema.json"
"""Where helm adds the schema (``compiler.AddResource``): the base of every relative reference."""
_KNOWN_DRAFTS = frozenset(
    (
        "json-schema.org/schema",
        "json-schema.org/draft/2020-12/schema",
        "json-schema.org/draft/2019-09/schema",
        "json-schema.org/draft-07/schema",
        "json-schema.org/draft-06/schema",
        "json-schema.org/draft-04/schema",
    )
)


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
    if bad is not None and bad[0] == "$schema":
        raise InputError(
            f"{origin}: $schema {bad[1][:200]!r} is not a JSON Schema draft helm has built in, so helm would "
            "fetch it; use draft-04, -06, -07, 2019-09 or 2020-12 (https://json-schema.org/draft/2020-12/schema)"
        )
    if bad is not None:
        raise InputError(
            f"{origin}: {bad[0]} {bad[1][:200]!r} refers outside the schema; a chart's values schema may "
            'only refer to its own definitions ("#/...")'
        )


def known_draft(url: str) -> int | None:
    """The draft a ``$schema`` URL names when the validator has it built in, else None (it would fetch it)."""
    base, _, fragment = url.partition("#")
    if fragment:
        return None
    for scheme in ("http://", "https://"):
        if base.startswith(scheme):
            base = base[len(scheme) :]
            break
    if base not in _KNOWN_DRAFTS:
        return None
    if "2020-12" in base or base == "json-schema.org/schema":
        return 2020
    return 2019 if "2019-09" in base else int(base.rsplit("draft-", 1)[1].split("/", 1)[0])


def _join(base: str, ref: str) -> str:
    """``ref`` resolved against ``base``, without its fragment (the document it names)."""
    from urllib.parse import urldefrag, urljoin

    if ref.startswith("urn:"):
        return urldefrag(ref)[0]
    if base.startswith("urn:"):  # no relative resolution against a URN: keep what is written
        return urldefrag(ref)[0] if ref and not ref.startswith("#") else urldefrag(base)[0]
    return urldefrag(urljoin(base, ref))[0]


def _outside_ref(doc: Any) -> tuple[str, str] | None:
    """The first (keyword, value) that would make helm load another document, walked without recursion."""
    draft = 2020  # the library's default when the root names no $schema
    if isinstance(doc, dict) and isinstance(doc.get("$schema"), str):
        draft = known_draft(doc["$schema"]) or draft
    ids = {ROOT_URI}
    refs: list[tuple[str, str, str]] = []  # (keyword, value, base it stands under)
    stack: list[tuple[Any, bool, str]] = [(doc, False, ROOT_URI)]
    while stack:
        node, names, base = stack.pop()
        if isinstance(node, list):
            stack.extend((item, False, base) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        if names:  # the keys of "properties" etc. are property names; their values are schemas
            stack.extend((value, False, base) for value in node.values())
            continue
        # draft 4-7: "$ref" makes every sibling ignored, $id included (the library's getID)
        id_key = "id" if draft == 4 else "$id"
        own_id = node.get(id_key)
        if isinstance(own_id, str) and own_id and not (draft < 2019 and "$ref" in node):
            base = _join(base, own_id)
            ids.add(base)
        for key, value in node.items():
            if key in _REF_KEYS and isinstance(value, str):
                refs.append((key, value, base))
            elif key == "$schema" and isinstance(value, str) and known_draft(value) is None:
                return key, value
            elif key not in _DATA_KEYS:
                stack.append((value, key in _NAME_MAPS, base))
    for key, value, base in refs:
        if value.startswith("#") or value.startswith("urn:") or _join(base, value).startswith("urn:"):
            continue
        if _join(base, value) not in ids:
            return key, value
    return None

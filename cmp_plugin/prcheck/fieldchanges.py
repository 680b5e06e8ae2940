"""The fields a PR changes in one resource, written as the alerts write them; generator renames paired.

Field changes come from the drift engine's structural diff (driftguard/diff.py: keyed lists, so a
container is named by its name), Secret values are masked by driftguard/redact.py, and paths and
values read like the alerts' (driftguard/readable.py): ``replicas`` 6 -> 9.

A ConfigMap or Secret made by a kustomize ``configMapGenerator``/``secretGenerator`` is named
``<name>-<hash>``: kustomize's HashTransformer appends ``-`` and the hash last, after any
``nameSuffix`` (kustomize plugin/builtin/hashtransformer/HashTransformer.go), and the hash is the
first 10 hex digits of a sha256 with ``0 1 3 a e`` written as ``g h k m t`` (api/hasher/hasher.go
``encode``). A chart that names them ``<name>-{{ sha256sum ... | trunc 10 }}`` leaves 10 plain hex
digits. When a PR changes such a map, the old name disappears and a new one appears in the same
environment: that is one change of its keys, not a removal and an addition.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from driftguard.diff import diff_objects
from driftguard.manifests import ResourceKey
from driftguard.readable import readable_path, short
from driftguard.redact import Redactor

__all__ = ["MAX_FIELDS", "FieldLine", "field_changes", "generator_renames", "hash_stem"]

MAX_FIELDS = 200
"""Field changes kept per resource (the JSON says how many more there were)."""
GENERATED_KINDS = frozenset({("", "ConfigMap"), ("", "Secret")})
# kustomize's 10 encoded characters (hex without 0 1 3 a e, plus g h k m t) or a plain hex checksum
_HASH_SUFFIX = re.compile(r"-([0-9a-fghkmt]{10})\Z")
_NAME = "/metadata/name"


@dataclass(frozen=True)
class FieldLine:
    """One changed field: readable path, JSON pointer, op, and the old and new values as shown."""

    path: str
    pointer: str
    op: str
    old: str
    new: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "pointer": self.pointer, "op": self.op, "old": self.old, "new": self.new}


def _shown(value: Any) -> str:
    """A value as the alerts show it: short, one line; an empty string visibly so."""
    return short(value) if value != "" else '""'


def field_changes(
    old: dict[str, Any], new: dict[str, Any], key: ResourceKey, redactor: Redactor, *, renamed: bool = False
) -> tuple[list[FieldLine], int]:
    """The fields that differ between two renders of one resource, masked and shortened; and how many
    were left out past ``MAX_FIELDS``. ``renamed``: the name change itself is said by the caller."""
    out: list[FieldLine] = []
    for change in diff_objects(old, new):
        if renamed and change.path == _NAME:
            continue
        masked = redactor.change(change, kind=key.kind, group=key.group)
        out.append(
            FieldLine(
                path=readable_path(masked.path, masked.segments) or "(the whole object)",
                pointer=masked.path,
                op=masked.op,
                old=_shown(masked.old),
                new=_shown(masked.new),
            )
        )
    return out[:MAX_FIELDS], max(0, len(out) - MAX_FIELDS)


def hash_stem(key: ResourceKey) -> str | None:
    """The name without its generator hash suffix, or None when ``key`` is not a generated map's name."""
    if (key.group, key.kind) not in GENERATED_KINDS:
        return None
    m = _HASH_SUFFIX.search(key.name)
    if m is None or m.start() == 0:
        return None
    return key.name[: m.start()]


def generator_renames(
    removed: list[ResourceKey], added: list[ResourceKey]
) -> list[tuple[ResourceKey, ResourceKey]]:
    """(old, new) pairs of one generated ConfigMap/Secret renamed by its hash: same kind, namespace and
    name before the suffix, exactly one going and one coming (two candidates either way are left as
    they are: which replaced which cannot be told)."""
    going: dict[tuple[str, str, str, str], list[ResourceKey]] = defaultdict(list)
    coming: dict[tuple[str, str, str, str], list[ResourceKey]] = defaultdict(list)
    for keys, into in ((removed, going), (added, coming)):
        for k in keys:
            stem = hash_stem(k)
            if stem is not None:
                into[(k.group, k.kind, k.namespace, stem)].append(k)
    pairs = []
    for bucket, olds in sorted(going.items()):
        news = coming.get(bucket, [])
        if len(olds) == 1 and len(news) == 1:
            pairs.append((olds[0], news[0]))
    return pairs

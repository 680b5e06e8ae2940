"""Who owns a changed field: the live object's managedFields and its last-applied annotation.

``Ownership`` parses them once per object; ``owns`` reads a FieldsV1 tree (``f:``, ``k:``, ``v:``,
``i:`` keys) as the API server writes it; ``lookup`` finds a path in the last-applied
configuration (keyed list items by key, else by index). The drift engine's attribution
(``driftguard/drift.py``) and Argo's three-way decision (``driftguard/three_way.py``) read them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from driftguard.diff import ListSeg, Segment
from driftguard.drift_classes import Actor, Policy
from driftguard.normalize import LAST_APPLIED

__all__ = ["Entry", "Ownership", "lookup", "newest", "owns"]


@dataclass(frozen=True)
class Entry:
    """One managedFields entry (status subresource entries are left out): who, how, when, which fields."""

    manager: str
    operation: str
    time: str
    fields: dict[str, Any]

    @property
    def actor(self) -> Actor:
        return Actor(self.manager, self.operation, self.time or None)


class Ownership:
    """The live object's managedFields and last-applied annotation, parsed lazily."""

    def __init__(self, live: Mapping[str, Any], policy: Policy) -> None:
        meta = live.get("metadata") or {}
        self.policy = policy
        self.entries: list[Entry] = []
        for e in meta.get("managedFields") or []:
            if (
                isinstance(e, dict)
                and e.get("subresource") != "status"
                and isinstance(e.get("fieldsV1"), dict)
            ):
                self.entries.append(
                    Entry(
                        str(e.get("manager", "")),
                        str(e.get("operation", "")),
                        str(e.get("time") or ""),
                        e["fieldsV1"],
                    )
                )
        self.last_applied: Any = None
        raw = (meta.get("annotations") or {}).get(LAST_APPLIED)
        if isinstance(raw, str):
            try:
                self.last_applied = json.loads(raw)
            except ValueError:
                self.last_applied = None

    def owners(self, segs: tuple[Segment, ...]) -> list[Entry]:
        return [e for e in self.entries if owns(e.fields, segs)]

    def toucher(self) -> Entry | None:
        """The newest non-Argo entry written after Argo CD's newest entry."""
        argo = [e.time for e in self.entries if e.manager in self.policy.argocd_managers]
        since = max(argo) if argo else ""
        later = [e for e in self.entries if e.manager not in self.policy.argocd_managers and e.time > since]
        return newest(later) if later else None


def newest(entries: list[Entry]) -> Entry:
    return max(entries, key=lambda e: e.time)


def owns(tree: dict[str, Any], segs: tuple[Segment, ...]) -> bool:
    """Whether a FieldsV1 tree owns ``segs`` (or an ancestor of it as a leaf, or part of it)."""
    if not tree:
        return False
    node = tree
    for seg in segs:
        if not node:
            return True  # a leaf owns everything below it (atomic field)
        child = _match_item(node, seg) if isinstance(seg, ListSeg) else node.get(f"f:{seg}")
        if child is None:
            return False
        node = child
    return True


def _match_item(node: dict[str, Any], seg: ListSeg) -> Any:
    item = seg.item
    for name, child in node.items():
        tag = name[:2]
        if tag == "k:":
            want = _parse_key(name)
            if (
                isinstance(item, dict)
                and isinstance(want, dict)
                and all(item.get(k) == v for k, v in want.items())
            ):
                return child
        elif tag == "v:":
            if _parse_key(name) == item:
                return child
        elif tag == "i:" and name[2:] == str(seg.index):
            return child
    return None


def _parse_key(name: str) -> Any:
    try:
        return _json_cached(name[2:])
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def _json_cached(text: str) -> Any:
    return json.loads(text)  # shared between callers: never mutated


def lookup(obj: Any, segs: tuple[Segment, ...]) -> tuple[bool, Any]:
    """Find ``segs`` in another object (last-applied), keyed list items by key, else by index."""
    node = obj
    for seg in segs:
        if isinstance(seg, ListSeg):
            if not isinstance(node, list):
                return False, None
            if seg.key is not None:
                found = [i for i in node if isinstance(i, dict) and all(i.get(k) == v for k, v in seg.key)]
                if not found:
                    return False, None
                node = found[0]
            elif seg.index < len(node):
                node = node[seg.index]
            else:
                return False, None
        else:
            if not isinstance(node, dict) or seg not in node:
                return False, None
            node = node[seg]
    return True, node

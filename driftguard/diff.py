"""Field-level structural diff of one Kubernetes resource: desired (Git) against live (cluster).

``diff_objects(desired, live)`` returns ``FieldChange`` items whose ``path`` is an RFC 6901 JSON
pointer into the *live* object (``~0``/``~1`` escaped), with ``op`` add (live has what Git does
not), remove (Git has what live lacks) or replace. For a removal the pointer names where the field
would be in live (its parents are live locations); a removed list item is named by its index in
desired; and ``json_patch(...)`` returns an RFC 6902
patch that turns desired into live when applied in order.

Lists of named items (containers, env, ports, volumes, volumeMounts, and any list whose items
all carry a unique merge key) are matched by key, so an insertion is one change and a pure
reorder is one ``replace`` of the list's key order, not N element changes. Resource quantities
are compared by value (``"2"`` equals ``2``; ``"1000m"`` equals ``"1"``), and a ``null`` in desired
means "not set", as Kubernetes reads it (the patch still accounts for it exactly).
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["FieldChange", "ListSeg", "Segment", "diff_objects", "escape", "json_patch", "pointer", "unescape"]

# list field name -> merge key fields (strategic-merge keys that are not plain `name`)
_MERGE_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "volumeMounts": (("mountPath",),),
    "volumeDevices": (("devicePath",),),
    "ports": (("containerPort", "protocol"), ("port", "protocol"), ("containerPort",), ("port",), ("name",)),
    "hostAliases": (("ip",),),
    "topologySpreadConstraints": (("topologyKey", "whenUnsatisfiable"),),
}
_DEFAULT_KEYS: tuple[tuple[str, ...], ...] = (("name",),)
_QUANTITY_SUFFIX = {
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


@dataclass(frozen=True)
class ListSeg:
    """A list element on a change's path: its index, its merge key (None if positional), the item."""

    index: int
    key: tuple[tuple[str, Hashable], ...] | None
    """((field, value), ...) of the merge key, or None for a positional list."""
    item: Any = field(compare=False, hash=False, repr=False)

    def __str__(self) -> str:
        return str(self.index)


Segment = str | ListSeg


@dataclass(frozen=True)
class FieldChange:
    """One difference: ``path`` (JSON pointer into live), ``op``, ``old`` (desired), ``new`` (live)."""

    path: str
    op: str
    old: Any
    new: Any
    segments: tuple[Segment, ...] = field(default=(), compare=False, repr=False)
    reorder: bool = field(default=False, compare=False, repr=False)
    """The change is a keyed list's order alone (``old``/``new`` are the keys in order)."""

    @property
    def stable_path(self) -> tuple[Hashable, ...]:
        """The path with keyed list items named by key: survives index shifts (used to match changes)."""
        return tuple(
            (("k", s.key) if s.key is not None else ("i", s.index)) if isinstance(s, ListSeg) else s
            for s in self.segments
        )


def escape(segment: str) -> str:
    """Escape one RFC 6901 reference token."""
    return str(segment).replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    """Unescape one RFC 6901 reference token."""
    return token.replace("~1", "/").replace("~0", "~")


def pointer(segments: tuple[Segment, ...] | list[Segment]) -> str:
    """The JSON pointer for a segment path."""
    return "".join("/" + (str(s.index) if isinstance(s, ListSeg) else escape(s)) for s in segments)


def diff_objects(desired: Any, live: Any) -> list[FieldChange]:
    """Every field that differs between ``desired`` and ``live``, most specific paths."""
    changes: list[FieldChange] = []
    if desired != live:
        _walk(desired, live, (), "", changes, None)
    return changes


def json_patch(desired: Any, live: Any) -> list[dict[str, Any]]:
    """An RFC 6902 patch that turns ``desired`` into ``live`` when applied in order."""
    ops: list[dict[str, Any]] = []
    if desired != live:
        _walk(desired, live, (), "", None, ops)
    return ops


def _walk(
    old: Any,
    new: Any,
    segs: tuple[Segment, ...],
    ppath: str,
    changes: list[FieldChange] | None,
    ops: list[dict[str, Any]] | None,
) -> None:
    """Record the difference of two unequal values. ``segs`` locate live; ``ppath`` is the patch path."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key, ov in old.items():
            if key in new:
                nv = new[key]
                if ov is not nv and ov != nv:
                    if ov is None:  # Git's null means "not set": live holds a value Git does not declare
                        _emit("add", None, nv, (*segs, key), f"{ppath}/{escape(key)}", changes, None)
                        _emit("replace", None, nv, (*segs, key), f"{ppath}/{escape(key)}", None, ops)
                    else:
                        _walk(ov, nv, (*segs, key), f"{ppath}/{escape(key)}", changes, ops)
            elif ov is None:  # null in Git and absent live: the same thing to Kubernetes
                _emit("remove", None, None, (*segs, key), f"{ppath}/{escape(key)}", None, ops)
            else:
                _emit("remove", ov, None, (*segs, key), f"{ppath}/{escape(key)}", changes, ops)
        for key, nv in new.items():
            if key not in old:
                _emit("add", None, nv, (*segs, key), f"{ppath}/{escape(key)}", changes, ops)
        return
    if isinstance(old, list) and isinstance(new, list):
        name = segs[-1] if segs and isinstance(segs[-1], str) else ""
        keyer = _keyer(name, old, new)
        if keyer is None:
            _positional(old, new, segs, ppath, changes, ops)
        else:
            _keyed(old, new, keyer, segs, ppath, changes, ops)
        return
    if _same_quantity(old, new, segs):
        return
    _emit("replace", old, new, segs, ppath, changes, ops)


def _emit(
    op: str,
    old: Any,
    new: Any,
    segs: tuple[Segment, ...],
    ppath: str,
    changes: list[FieldChange] | None,
    ops: list[dict[str, Any]] | None,
) -> None:
    if changes is not None:
        changes.append(FieldChange(pointer(segs), op, old, new, segs))
    if ops is not None:
        ops.append({"op": op, "path": ppath} if op == "remove" else {"op": op, "path": ppath, "value": new})


def _positional(
    old: list[Any],
    new: list[Any],
    segs: tuple[Segment, ...],
    ppath: str,
    changes: list[FieldChange] | None,
    ops: list[dict[str, Any]] | None,
) -> None:
    common = min(len(old), len(new))
    for i in range(common):
        if old[i] != new[i]:
            _walk(old[i], new[i], (*segs, ListSeg(i, None, new[i])), f"{ppath}/{i}", changes, ops)
    for i in range(len(old) - 1, common - 1, -1):
        _emit("remove", old[i], None, (*segs, ListSeg(i, None, old[i])), f"{ppath}/{i}", changes, ops)
    for i in range(common, len(new)):
        _emit("add", None, new[i], (*segs, ListSeg(i, None, new[i])), f"{ppath}/{i}", changes, ops)


def _keyed(
    old: list[Any],
    new: list[Any],
    keyer: tuple[str, ...],
    segs: tuple[Segment, ...],
    ppath: str,
    changes: list[FieldChange] | None,
    ops: list[dict[str, Any]] | None,
) -> None:
    old_keys = [tuple((k, item.get(k)) for k in keyer) for item in old]
    new_keys = [tuple((k, item.get(k)) for k in keyer) for item in new]
    new_index = {k: i for i, k in enumerate(new_keys)}
    old_index = {k: i for i, k in enumerate(old_keys)}
    matched_in_old_order = [k for k in old_keys if k in new_index]
    matched_in_new_order = [k for k in new_keys if k in old_index]
    reordered = matched_in_old_order != matched_in_new_order
    # 1. changes inside matched items (patch paths use desired indices: structure is unchanged yet)
    for oi, key in enumerate(old_keys):
        ni = new_index.get(key)
        if ni is not None and old[oi] != new[ni]:
            seg = ListSeg(ni, key, new[ni])
            _walk(old[oi], new[ni], (*segs, seg), f"{ppath}/{oi}", changes, ops if not reordered else None)
    # 2. removals, highest desired index first; 3. additions at their live index, lowest first
    for oi in range(len(old) - 1, -1, -1):
        if old_keys[oi] not in new_index:
            seg = ListSeg(oi, old_keys[oi], old[oi])
            _emit(
                "remove",
                old[oi],
                None,
                (*segs, seg),
                f"{ppath}/{oi}",
                changes,
                ops if not reordered else None,
            )
    for ni, key in enumerate(new_keys):
        if key not in old_index:
            seg = ListSeg(ni, key, new[ni])
            _emit(
                "add", None, new[ni], (*segs, seg), f"{ppath}/{ni}", changes, ops if not reordered else None
            )
    if reordered:
        # one change for the order itself; the patch replaces the list wholesale
        if changes is not None:
            changes.append(
                FieldChange(
                    pointer(segs),
                    "replace",
                    _names(matched_in_old_order),
                    _names(matched_in_new_order),
                    segs,
                    reorder=True,
                )
            )
        if ops is not None:
            ops.append({"op": "replace", "path": ppath, "value": new})


def _names(keys: list[tuple[tuple[str, Hashable], ...]]) -> list[Any]:
    return [k[0][1] if len(k) == 1 else dict(k) for k in keys]


def _keyer(name: str, old: list[Any], new: list[Any]) -> tuple[str, ...] | None:
    """The merge key for two lists, or None when they must be compared by position."""
    if not old or not new:
        return None
    for candidate in _MERGE_KEYS.get(name, ()) + _DEFAULT_KEYS:
        if _unique_key(old, candidate) and _unique_key(new, candidate):
            return candidate
    return None


def _unique_key(items: list[Any], key: tuple[str, ...]) -> bool:
    seen = set()
    for item in items:
        if not isinstance(item, dict) or any(k not in item for k in key):
            return False
        value = tuple(item.get(k) for k in key)
        try:
            if value in seen:
                return False
            seen.add(value)
        except TypeError:  # an unhashable "key" is not a key
            return False
    return True


def _same_quantity(old: Any, new: Any, segs: tuple[Segment, ...]) -> bool:
    """Resource quantities compare by value: `2` == "2", "1000m" == "1", "1Gi" == "1024Mi"."""
    if len(segs) < 3 or segs[-3] != "resources" or segs[-2] not in ("limits", "requests"):
        return False
    a, b = _quantity(old), _quantity(new)
    return a is not None and a == b


def _quantity(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str) or not value:
        return None
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E"):
        if value.endswith(suffix):
            number, scale = value[: -len(suffix)], _QUANTITY_SUFFIX[suffix]
            break
    else:
        number, scale = value, Decimal(1)
    try:
        return Decimal(number) * scale
    except InvalidOperation:
        return None


def dumps(value: Any) -> str:
    """Compact, stable JSON for display and hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)

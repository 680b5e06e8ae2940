"""A YAML mapping read the way Go fills a struct from it: field names matched case-insensitively.

helm (Chart.yaml, requirements.yaml) and kustomize (kustomization.yaml, builtin plugin configs)
decode YAML with ``sigs.k8s.io/yaml``: YAML to JSON, then ``encoding/json`` into a struct. Go's
``encoding/json`` matches an object key to a field by its exact name, else by ``bytes.EqualFold``
(decode.go ``object``; Unicode simple folding, so ``Repository``, ``REPOSITORY`` and
``\u212aind`` with a Kelvin sign all fill the field named ``repository`` / ``kind``). A check that
looks up ``repository`` alone is blind to every other spelling; reading through ``GoStruct`` it
is not. Two keys of one mapping that fold to the field asked for are refused: Go would keep the
last, and a reader that picked the other would check the wrong value.
"""

from __future__ import annotations

from typing import Any

from driftguard.errors import InputError

__all__ = ["GoStruct", "fold", "go_struct"]

# the only non-ASCII runes whose simple case folding reaches an ASCII letter (unicode.SimpleFold)
_SPECIAL = {"\u212a": "k", "\u017f": "s"}


def fold(name: str) -> str:
    """``name`` folded as ``bytes.EqualFold`` compares it with an ASCII field name."""
    return "".join(_SPECIAL.get(c, c.lower() if c.isascii() else c) for c in name)


class GoStruct:
    """Read-only view of a mapping with Go's field matching; nested mappings are GoStructs too."""

    __slots__ = ("_data", "_folded", "_origin")

    def __init__(self, data: dict[Any, Any], origin: str) -> None:
        self._data = data
        self._origin = origin
        folded: dict[str, list[str]] = {}
        for key in data:
            if isinstance(key, str):
                folded.setdefault(fold(key), []).append(key)
        self._folded = folded

    def get(self, field: str, default: Any = None) -> Any:
        """The value of ``field`` as Go fills it; InputError when two keys fold to it."""
        keys = self._folded.get(fold(field))
        if not keys:
            return default
        if len(keys) > 1:
            raise InputError(
                f"{self._origin}: keys {', '.join(repr(k) for k in keys)} are one field ({field!r}) to Go, "
                "which reads them case-insensitively; keep one"
            )
        return _wrap(self._data[keys[0]], self._origin)

    def __contains__(self, field: object) -> bool:
        return isinstance(field, str) and fold(field) in self._folded

    def __getitem__(self, field: str) -> Any:
        if field not in self:
            raise KeyError(field)
        return self.get(field)

    def check_unique(self) -> None:
        """Refuse any two keys that fold to one name (for a struct whose every key is a field)."""
        for keys in self._folded.values():
            if len(keys) > 1:
                self.get(keys[0])


def _wrap(value: Any, origin: str) -> Any:
    if isinstance(value, dict):
        return GoStruct(value, origin)
    if isinstance(value, list):
        return [_wrap(v, origin) for v in value]
    return value


def go_struct(value: Any, origin: str) -> GoStruct | None:
    """``value`` as a top-level struct (every key a field: two folding alike refused), else None."""
    if not isinstance(value, dict):
        return None
    found = GoStruct(value, origin)
    found.check_unique()
    return found

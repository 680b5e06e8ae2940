"""Secret values never leave the process.

Masked: Secret ``data``/``stringData`` values; any value under a key that looks sensitive
(password, token, secret, apikey, credentials, private key ...) in any kind; the ``value`` of a
``{name, value}`` item whose name looks sensitive (env vars); and the last-applied annotation of
a Secret (it holds the data). A mask keeps a short salted hash so a reader still sees *that* a
value changed, and whether two masked values are equal, without learning either.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any

from driftguard.diff import FieldChange, ListSeg, Segment, dumps

__all__ = ["DEFAULT_SENSITIVE", "Redactor"]

DEFAULT_SENSITIVE = (
    r"(?i)(passw(or)?d|passphrase|secret|token|api[-_]?key|credential|private[-_]?key|access[-_]?key"
    r"|client[-_]?key|auth|bearer|cookie|session[-_]?key|connection[-_]?string|dsn|signing[-_]?key)"
)
# keys that name or point at a secret rather than hold one
_REFERENCE_SUFFIX = re.compile(r"(Name|Ref|Refs|Seconds|Path|Namespace)$")
# a container under one of these keys is a reference to a Secret (a volume source), not a value
_REFERENCE_CONTAINERS = frozenset({"secret"})
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MASK = "***"


@dataclass(frozen=True)
class Redactor:
    """Masks sensitive values; ``salt`` keeps the short hashes unguessable (random per process by default)."""

    salt: bytes = field(default_factory=lambda: os.urandom(16), repr=False)
    sensitive: str = DEFAULT_SENSITIVE

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rx", re.compile(self.sensitive))
        object.__setattr__(self, "_keys", {})

    def mask(self, value: Any) -> Any:
        """``***(sha256:abcd1234)`` for a value; None and Argo CD's own ``+++`` masks stay as they are."""
        if value is None:
            return None
        if isinstance(value, str) and value and set(value) == {"+"}:
            return value
        digest = hmac.new(self.salt, dumps(value).encode(), hashlib.sha256).hexdigest()[:8]
        return f"{MASK}(sha256:{digest})"

    def is_sensitive_key(self, key: str) -> bool:
        """A mapping key whose value must be masked."""
        cache: dict[str, bool] = self._keys  # type: ignore[attr-defined]
        hit = cache.get(key)
        if hit is None:
            hit = bool(self._rx.search(key)) and not _REFERENCE_SUFFIX.search(key)  # type: ignore[attr-defined]
            if len(cache) < 10_000:
                cache[key] = hit
        return hit

    def change(self, change: FieldChange, *, kind: str, group: str = "") -> FieldChange:
        """The change with every sensitive value in ``old`` and ``new`` masked."""
        if self._masks_path(change.segments, kind=kind, group=group):
            return replace(change, old=self._mask_deep(change.old), new=self._mask_deep(change.new))
        if kind == "Secret" and group == "" and not change.segments:
            return replace(
                change, old=self.value(change.old, kind=kind), new=self.value(change.new, kind=kind)
            )
        return replace(change, old=self.value(change.old), new=self.value(change.new))

    def _masks_path(self, segs: tuple[Segment, ...], *, kind: str, group: str) -> bool:
        keys = [s for s in segs if isinstance(s, str)]
        if kind == "Secret" and group == "" and segs and segs[0] in ("data", "stringData"):
            return True
        if kind == "Secret" and group == "" and keys[:3] == ["metadata", "annotations", _LAST_APPLIED]:
            return True
        last = len(keys) - 1
        if any(
            self.is_sensitive_key(k) and not (k in _REFERENCE_CONTAINERS and i < last)
            for i, k in enumerate(keys)
        ):
            return True
        # the value of an env-style {name: DB_PASSWORD, value: ...} item
        for i, seg in enumerate(segs):
            item = seg.item if isinstance(seg, ListSeg) else None
            if (
                isinstance(item, dict)
                and i + 1 < len(segs)
                and segs[i + 1] == "value"
                and self._sensitive_item(item)
            ):
                return True
        return False

    def value(self, value: Any, *, kind: str = "") -> Any:
        """A copy of a value (an object or part of one) with sensitive parts masked."""
        if kind == "Secret" and isinstance(value, dict):
            out = {k: v for k, v in value.items()}
            for section in ("data", "stringData"):
                if isinstance(out.get(section), dict):
                    out[section] = {k: self.mask(v) for k, v in out[section].items()}
            meta = out.get("metadata")
            if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
                ann = dict(meta["annotations"])
                if _LAST_APPLIED in ann:
                    ann[_LAST_APPLIED] = self.mask(ann[_LAST_APPLIED])
                out["metadata"] = {**meta, "annotations": ann}
            return self.value(out)
        if isinstance(value, dict):
            sensitive_item = self._sensitive_item(value)
            return {k: self._value_under(str(k), v, sensitive_item) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def _value_under(self, key: str, value: Any, sensitive_item: bool) -> Any:
        if key in _REFERENCE_CONTAINERS and isinstance(value, dict):
            return self.value(value)
        if self.is_sensitive_key(key) or (sensitive_item and key == "value"):
            return self._mask_deep(value)
        return self.value(value)

    def _sensitive_item(self, item: dict[str, Any]) -> bool:
        name = item.get("name")
        return isinstance(name, str) and "value" in item and bool(self._rx.search(name))  # type: ignore[attr-defined]

    def _mask_deep(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self._mask_deep(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._mask_deep(v) for v in value]
        return self.mask(value)

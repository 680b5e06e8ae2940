"""Entries of the sidecar's own cache directory, keyed by the content they were computed from.

Argo CD renders the same revision on every refresh and for every Application that uses a chart;
what implicit-defaults learns from a chart's templates and YAML files depends on their content
only, so it is kept here as JSON under a BLAKE2 digest of that content (no tenant can make two
contents share an entry) and read back instead of recomputed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["blob_get", "blob_put", "cache_get", "cache_put", "content_key", "hasher"]

KEEP = 128
"""Entries kept per kind (the part of the name before the first '-'); older ones are removed."""

KEEP_BYTES = 64 << 20
"""Bytes kept per kind: with KEEP, what one kind may hold in the sidecar's shared cache directory."""


def hasher(data: bytes) -> Any:
    """BLAKE2b without importing hashlib (which loads OpenSSL, ~5 ms): keys that no tenant can collide."""
    try:
        from _blake2 import blake2b
    except ImportError:  # an interpreter without the builtin module
        from hashlib import blake2b
    return blake2b(data, digest_size=32)


def content_key(text: str) -> str:
    """A collision-resistant digest of a text, for cache entries keyed by content."""
    return str(hasher(text.encode(errors="replace")).hexdigest())


MAX_ENTRY = 4 << 20
"""An entry larger than this is neither written nor read: the render computes it again instead.

Entries are computed from tenant content, and JSON writes YAML aliases out in full: 1.5 KB of
values with nested aliases is an 11 MB entry, one per content a tenant commits. The cap (with
KEEP_BYTES) keeps the cache directory, which every tenant's render shares, from filling up.
"""


def cache_get(cache_dir: Path, name: str) -> Any:
    """A JSON entry of the sidecar's own cache directory, or None.

    Read only when it is ours to trust (paths.open_private: a regular file, no symlink, our uid,
    not group/other-writable): a planted entry could otherwise tell implicit-defaults that a chart
    has no gates, and the guard would stay quiet.
    """
    from cmp_plugin.paths import open_private

    data = open_private(str(cache_dir / f"{name}.json"), MAX_ENTRY)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def cache_put(cache_dir: Path, name: str, body: Any) -> None:
    """Write an entry atomically; keep the newest entries of its kind (the part of ``name`` before '-')
    within KEEP entries and KEEP_BYTES bytes; an entry over MAX_ENTRY is not written."""
    try:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        from cmp_plugin.paths import write_private

        data = json.dumps(body, separators=(",", ":"), default=str).encode()
        if len(data) > MAX_ENTRY:
            return
        write_private(str(cache_dir / f"{name}.json"), data)
        _evict(cache_dir, name.split("-", 1)[0], ".json", KEEP, KEEP_BYTES)
    except OSError:
        pass  # a cache that cannot be written only costs the next render the work again


def _evict(cache_dir: Path, kind: str, suffix: str, keep: int, keep_bytes: int) -> None:
    """Remove the oldest entries of ``kind`` (by mtime) past ``keep`` entries or ``keep_bytes`` bytes."""
    entries = []
    for path in cache_dir.glob(f"{kind}-*{suffix}"):
        try:
            entries.append((path.stat(), path))
        except OSError:
            continue  # removed by another render meanwhile
    entries.sort(key=lambda e: e[0].st_mtime_ns, reverse=True)
    total = 0
    for kept, (stat, path) in enumerate(entries, 1):  # newest first: keep within both budgets
        total += stat.st_size
        if kept > keep or total > keep_bytes:
            path.unlink(missing_ok=True)


def blob_get(cache_dir: Path, name: str, limit: int) -> bytes | None:
    """The bytes of a binary entry (``<name>.bin``) when ours to trust and at most ``limit``; else None.

    A hit is marked as used (its mtime), so that eviction removes the least recently used first.
    """
    import contextlib
    import os

    from cmp_plugin.paths import open_private

    path = str(cache_dir / f"{name}.bin")
    data = open_private(path, limit + 1)
    if data is None or len(data) > limit:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)
    return data


def blob_put(cache_dir: Path, name: str, data: bytes, *, keep: int, keep_bytes: int) -> bool:
    """Write a binary entry atomically (mode 0600, no symlink followed), then evict its kind's oldest
    entries past ``keep`` entries or ``keep_bytes`` bytes; False when it was not written."""
    if len(data) > keep_bytes:
        return False
    try:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        from cmp_plugin.paths import write_private

        write_private(str(cache_dir / f"{name}.bin"), data)
        _evict(cache_dir, name.split("-", 1)[0], ".bin", keep, keep_bytes)
    except OSError:
        return False
    return True

"""What a flip proof (flip_proof.py) found, kept in the sidecar's cache under a digest of everything its renders read."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmp_plugin.content_cache import hasher
from cmp_plugin.helmchart.flip_records import (
    _VERSION,
    MAX_CHART_BYTES,
    Flip,
    Proof,
    Resource,
)
from driftguard.errors import DriftguardError
from driftguard.manifests import ResourceKey

if TYPE_CHECKING:
    from cmp_plugin.renderers.base import RenderJob


def chart_digest(chart_dir: Path) -> str | None:
    """A digest of every file under the chart (None when it is too large to be worth it)."""
    h = hasher(_VERSION.encode())
    total = 0
    for root, dirs, files in os.walk(chart_dir):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            path = Path(root, name)
            try:
                data = path.read_bytes()
            except OSError:
                continue
            total += len(data)
            if total > MAX_CHART_BYTES:
                return None
            # git stores any bytes as a name: hashed as the bytes they are
            h.update(
                f"\0{path.relative_to(chart_dir).as_posix()}\0{len(data)}\0".encode(errors="surrogateescape")
            )
            h.update(data)
    return str(h.hexdigest())


_BASES: dict[tuple[str, str, str], str | None] = {}
"""content_digest's part that does not depend on ``what``, per render: the guard's verdicts and its
proof ask for it in one render, and hashing every file of a large chart twice cost ~0.1 s."""


def content_digest(job: RenderJob, what: str) -> str | None:
    """A digest of everything a render of ``job`` reads (every chart file, the values files and
    parameters, helm's arguments, the helm binary) and of ``what`` is computed from it; None when
    the chart is too large or something cannot be read."""
    memo = (str(job.app_dir), str(job.scratch), repr(job.env))
    if memo not in _BASES:
        if len(_BASES) > 16:
            _BASES.clear()
        _BASES[memo] = _base_digest(job)
    base = _BASES[memo]
    if base is None:
        return None
    h = hasher(base.encode())
    h.update(b"\0" + what.encode())
    return str(h.hexdigest())


def _base_digest(job: RenderJob) -> str | None:
    from cmp_plugin.renderers.helm import helm_argv, values_files

    chart = chart_digest(job.app_dir)
    if chart is None:
        return None
    h = hasher(chart.encode())
    try:
        tool = Path(job.settings.helm_path()).stat()  # another helm may render another stream
        h.update(f"\0helm\0{tool.st_size}\0{tool.st_mtime_ns}\0{tool.st_ino}".encode())
        files = values_files(job)
        argv = helm_argv("helm", job, values_files=files)
        for f in files:
            h.update(b"\0values\0" + f.read_bytes())
    except (OSError, DriftguardError):
        return None
    # paths differ between renders (scratch, checkout): the files' contents are hashed instead
    for a in argv:
        h.update(b"\0" + (b"<path>" if a.startswith("/") else a.encode()))
    return str(h.hexdigest())


def _digest(job: RenderJob, flips: list[Flip], want: str, targets: list[ResourceKey]) -> str | None:
    what = json.dumps([want, [list(f) for f in flips], [list(t) for t in targets]], default=str)
    return content_digest(job, what)


def _dump(proof: Proof) -> dict[str, Any]:
    return {
        "changed": {k: [[list(r.key), r.template, r.kept] for r in v] for k, v in proof.changed.items()},
        "failed": proof.failed,
        "pending": list(proof.pending),
        "groups": [list(g) for g in proof.groups],
    }


def _load(raw: Any, flips: list[Flip]) -> Proof | None:
    try:
        keys = {f.key for f in flips}
        changed = {
            str(k): tuple(Resource(ResourceKey(*r[0]), str(r[1]), bool(r[2])) for r in v)
            for k, v in raw["changed"].items()
            if k in keys
        }
        failed = {str(k): str(v) for k, v in raw["failed"].items() if k in keys}
        pending = tuple(str(k) for k in raw.get("pending", []) if k in keys)
        groups = tuple(tuple(str(k) for k in g if k in keys) for g in raw.get("groups", []))
        return Proof(changed, failed, 0, pending, groups)
    except (TypeError, KeyError, ValueError, IndexError):
        return None

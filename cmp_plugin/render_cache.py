"""Renders served by fingerprint: same inputs, same stdout bytes and stderr lines, without a tool.

Argo CD keys its manifest cache by revision, so every commit to a monorepo makes the repo-server
ask for every Application again. A render whose fingerprint (cmp_plugin/fingerprint.py) was
rendered before is served from ``render-<digest>.bin`` in the sidecar's cache dir: the manifests,
the warnings of every guard but shrink, and what Argo CD keeps of it. The shrink guard decides
against the Application's state outside the inputs (the cluster's baseline, the approval), so it
runs again on every hit; when it would refuse, the hit is dropped and the render runs in full, so
the refusal names the key behind each removal as a full render does.

Never cached: a render that is not cacheable (its fingerprint says why: nondeterministic
templates, remote inputs), a refusal or error, a render whose implicit-defaults proofs were still
pending, and anything where a tool could write the cache: the cache dir must be out of the tools'
reach (cmp_plugin/sandbox.py: Landlock available, the dir neither in the checkout nor under
``DRIFTGUARD_CMP_TOOL_WRITE_PATHS``). Entries are written only by the plugin, atomically (mode
0600, no symlink followed) and read only when private (paths.open_private); the kind is bounded
by ``DRIFTGUARD_CMP_RENDER_CACHE_BYTES`` (0 turns it off) and ``KEEP`` entries, least recently
used removed first. The key is the digest of the inputs only, so Applications with identical
inputs share an entry safely.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, NamedTuple

from driftguard.manifests import ResourceKey

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from cmp_plugin.argo_env import AppEnv
    from cmp_plugin.settings import CmpSettings

__all__ = ["KEEP", "Hit", "load", "store", "usable"]

MAGIC = b"driftguard-render 1\n"
KEEP = 4096
"""Render entries kept at most, whatever their size."""


class Hit(NamedTuple):
    text: str
    renderer: str
    warnings: list[str]
    """Every warning line of the render but the shrink guard's, in the order printed."""
    keys: list[ResourceKey]
    """Every resource's key, as the render's identities gave them."""
    kept: list[ResourceKey]


def usable(settings: CmpSettings, repo_root: Path) -> bool:
    """Whether renders may be cached at all: on, and the cache dir out of every tool's reach."""
    if settings.render_cache_bytes <= 0:
        return False
    from cmp_plugin import sandbox

    if not sandbox.available():
        return False  # nothing keeps a tool from writing the cache
    cache = os.path.realpath(settings.cache_dir)
    # what a tool may write (sandbox.configure): the checkout, its own scratch (a new directory
    # under the scratch root, never the cache) and the platform's extra write paths
    writable = [str(repo_root), *(p for p in settings.tool_write_paths.split(":") if p)]
    for place in writable:
        real = os.path.realpath(place)
        if cache == real or cache.startswith(real.rstrip("/") + "/"):
            return False
    return True


def load(settings: CmpSettings, digest: str) -> Hit | None:
    """The cached render of ``digest``, or None."""
    from cmp_plugin.content_cache import blob_get

    data = blob_get(settings.cache_dir, f"render-{digest}", settings.max_output_bytes + (16 << 20))
    if data is None or not data.startswith(MAGIC):
        return None
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        return None
    try:
        head = json.loads(data[len(MAGIC) : end])
        text = data[end + 1 :].decode()
        return Hit(
            text,
            str(head["renderer"]),
            [str(w) for w in head["warnings"]],
            [ResourceKey(*k) for k in head["keys"]],
            [ResourceKey(*k) for k in head["kept"]],
        )
    except (ValueError, KeyError, TypeError):
        return None


def store(
    settings: CmpSettings,
    digest: str,
    *,
    text: str,
    renderer: str,
    warnings: list[str],
    keys: list[ResourceKey],
    kept: list[ResourceKey],
) -> bool:
    """Keep a render that passed every guard under its fingerprint; False when not written."""
    from cmp_plugin.content_cache import blob_put

    head = json.dumps(
        {
            "renderer": renderer,
            "warnings": warnings,
            "keys": [list(k) for k in keys],
            "kept": [list(k) for k in kept],
        },
        separators=(",", ":"),
    ).encode()
    data = MAGIC + head + b"\n" + text.encode()
    return blob_put(
        settings.cache_dir, f"render-{digest}", data, keep=KEEP, keep_bytes=settings.render_cache_bytes
    )


def digest_for(
    app_dir: Path,
    repo_root: Path,
    env: AppEnv,
    settings: CmpSettings,
    renderer: str,
    environ: Mapping[str, str],
) -> str | None:
    """The render's fingerprint when it may be cached (the confinement walk runs either way)."""
    from cmp_plugin import fingerprint

    return fingerprint.compute(app_dir, repo_root, env, settings, renderer, environ).digest

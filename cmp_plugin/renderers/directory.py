"""Plain manifests: every YAML/JSON file under the app directory, recursively, in path order."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cmp_plugin.renderers.base import Deferred, Rendered, RenderJob
from driftguard.errors import LimitExceeded

__all__ = ["DirectoryRenderer", "manifest_files"]

SUFFIXES = (".yaml", ".yml", ".json")


class DirectoryRenderer:
    name = "directory"

    def detect(self, app_dir: Path) -> bool:
        return True  # the fallback: whatever is left is plain manifests

    def start(self, job: RenderJob) -> Deferred:
        return Deferred(lambda: self.render(job))

    def render(self, job: RenderJob) -> Rendered:
        """Read every manifest file (fully parsed: a directory has no renderer to trust)."""
        from cmp_plugin.scan import Doc
        from driftguard.manifests import Limits, load_file

        limits = Limits(max_bytes=job.settings.max_output_bytes)
        parts: list[str] = []
        docs: list[Doc] = []
        total = 0
        for path in manifest_files(job.app_dir):
            rel = str(path.relative_to(job.app_dir))
            loaded = load_file(path, limits=limits)
            if path.suffix == ".json":
                parts += [json.dumps(d.obj) + "\n" for d in loaded]
            else:
                text = path.read_text(encoding="utf-8-sig")
                parts.append(text if text.endswith("\n") else text + "\n")
            for d in loaded:
                meta = d.obj["metadata"]
                docs.append(
                    Doc(
                        d.obj["apiVersion"],
                        d.obj["kind"],
                        str(meta.get("name") or meta.get("generateName")),
                        str(meta.get("namespace") or ""),
                        rel,
                        d.line,
                        d.obj,
                        None,
                        bool(meta.get("name")),
                    )
                )
            total += path.stat().st_size
            if total > job.settings.max_output_bytes:
                raise LimitExceeded(
                    f"manifests add up to more than {job.settings.max_output_bytes} bytes", source=rel
                )
        return Rendered("---\n".join(parts), self.name, docs)


def manifest_files(app_dir: Path) -> list[Path]:
    """YAML/JSON files below ``app_dir``, hidden files and directories skipped, sorted by path."""
    found = []
    for dirpath, dirnames, filenames in os.walk(app_dir):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(SUFFIXES) and not name.startswith("."):
                found.append(Path(dirpath) / name)
    return sorted(found)

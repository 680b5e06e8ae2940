"""Plain manifests: the app directory read as Argo CD reads a directory source (cmp_plugin/dirsource.py).

Parameters ``recurse`` (default false: the top level only), ``include`` and ``exclude`` (Argo CD's
``directory.recurse/include/exclude``, gobwas globs on the path relative to the app directory).
A YAML file that is no Kubernetes manifest is skipped with a warning line; ``.jsonnet`` is refused.
"""

from __future__ import annotations

from pathlib import Path

from cmp_plugin.renderers.base import Deferred, Rendered, RenderJob

__all__ = ["DirectoryRenderer"]


class DirectoryRenderer:
    name = "directory"

    def detect(self, app_dir: Path) -> bool:
        return True  # the fallback: whatever is left is plain manifests

    def start(self, job: RenderJob) -> Deferred:
        return Deferred(lambda: self.render(job))

    def render(self, job: RenderJob) -> Rendered:
        """Read every manifest file Argo CD would read (fully parsed: a directory has no renderer to trust)."""
        from cmp_plugin import dirsource
        from cmp_plugin.scan import Doc, scan_stream
        from driftguard.manifests import Limits

        env = job.env
        files, warnings = dirsource.find_manifests(
            job.app_dir,
            job.repo_root,
            recurse=bool(env.param("recurse")),
            include=str(env.param("include")),
            exclude=str(env.param("exclude")),
            max_bytes=job.settings.max_output_bytes,
        )
        limits = Limits(max_bytes=job.settings.max_output_bytes)
        parts: list[str] = []
        docs: list[Doc] = []
        for f in files:
            if not f.text:
                continue
            # every document starts with "---": a stream beginning with "{" would be read as JSON
            parts.append("---\n" + (f.text if f.text.endswith("\n") else f.text + "\n"))
            docs += scan_stream(f.text, source=f.rel, limits=limits)
        return Rendered("".join(parts), self.name, docs, tuple(warnings))

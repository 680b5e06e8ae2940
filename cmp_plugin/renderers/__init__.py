"""Renderers, one module per tool, registered here in the order auto-detection tries them."""

from __future__ import annotations

from pathlib import Path

from cmp_plugin.renderers.base import Rendered, Renderer, RenderJob
from cmp_plugin.renderers.directory import DirectoryRenderer
from cmp_plugin.renderers.helm import HelmRenderer
from cmp_plugin.renderers.kustomize import KustomizeRenderer
from driftguard.errors import InputError

__all__ = ["RENDERERS", "RenderJob", "Rendered", "Renderer", "choose"]

RENDERERS: dict[str, Renderer] = {
    "helm": HelmRenderer(),
    "kustomize": KustomizeRenderer(),
    "directory": DirectoryRenderer(),
}


def choose(app_dir: Path, wanted: str = "auto") -> Renderer:
    """The renderer named by ``wanted``, or the first whose marker files ``app_dir`` holds."""
    if wanted != "auto":
        renderer = RENDERERS[wanted]
        if not renderer.detect(app_dir):
            raise InputError(
                f"renderer {wanted} was asked for, but {app_dir.name or app_dir} has no {wanted} marker file"
            )
        return renderer
    for renderer in RENDERERS.values():
        if renderer.detect(app_dir):
            return renderer
    raise InputError("no renderer applies")  # unreachable: directory always applies

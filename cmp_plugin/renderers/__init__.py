"""Renderers, one module per tool, registered here in the order auto-detection tries them.

The order is Argo CD's: its discovery (util/app/discovery/discovery.go, ``Discover``, v3.5.1) walks
the app directory and records Helm for a ``Chart.yaml`` and then Kustomize for a kustomization
file, the later assignment winning, so a directory with both renders with Kustomize (which can
itself inflate the chart through ``helmCharts`` with ``kustomize-enable-helm``). One difference,
on purpose: Argo CD counts any file *ending* in ``Chart.yaml`` (``OldChart.yaml``) as a Helm
marker, and then ``helm template`` fails for want of a ``Chart.yaml``; here only ``Chart.yaml``
itself is, and such a directory renders as plain manifests or Kustomize.
"""

from __future__ import annotations

from pathlib import Path

from cmp_plugin.renderers.base import Rendered, Renderer, RenderJob
from cmp_plugin.renderers.directory import DirectoryRenderer
from cmp_plugin.renderers.helm import HelmRenderer
from cmp_plugin.renderers.kustomize import KustomizeRenderer
from driftguard.errors import InputError

__all__ = ["RENDERERS", "RenderJob", "Rendered", "Renderer", "choose"]

RENDERERS: dict[str, Renderer] = {
    "kustomize": KustomizeRenderer(),
    "helm": HelmRenderer(),
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

"""Kustomize: ``kustomize build`` (or ``kubectl kustomize``) with Argo CD's build options."""

from __future__ import annotations

from pathlib import Path

from cmp_plugin.process import tool_env
from cmp_plugin.renderers.base import RenderJob, ToolRender, start_tool

__all__ = ["MARKERS", "KustomizeRenderer"]

MARKERS = ("kustomization.yaml", "kustomization.yml", "Kustomization")


class KustomizeRenderer:
    name = "kustomize"

    def detect(self, app_dir: Path) -> bool:
        return any((app_dir / m).is_file() for m in MARKERS)

    def start(self, job: RenderJob) -> ToolRender:
        argv = [*job.settings.kustomize_argv(), str(job.app_dir)]  # Argo CD builds "." there: same output
        argv += ["--load-restrictor", job.env.param("kustomize-load-restrictor")]
        if job.env.param("kustomize-enable-helm"):
            argv += ["--enable-helm", "--helm-command", job.settings.helm_path()]
        run = start_tool(job, argv, env=tool_env(job.scratch), name="kustomize build", plannable=True)
        return ToolRender(run, self.name)

"""Helm: ``helm template`` with the flags Argo CD passes natively."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cmp_plugin.process import run_tool, tool_env
from cmp_plugin.renderers.base import RenderJob, ToolRender, confined, start_tool
from driftguard.errors import InputError, RenderError

__all__ = ["HelmRenderer", "helm_argv", "missing_dependencies"]


class HelmRenderer:
    name = "helm"

    def detect(self, app_dir: Path) -> bool:
        return (app_dir / "Chart.yaml").is_file()

    def start(self, job: RenderJob) -> ToolRender:
        helm = job.settings.helm_path()
        env = tool_env(job.scratch)
        missing = missing_dependencies(job.app_dir)
        if missing:
            if job.early is not None:
                job.early.close()  # a planned template run must not read charts/ while it is built
            try:
                run_tool(
                    [helm, "dependency", "build", str(job.app_dir), "--skip-refresh"],
                    env=env,
                    timeout=job.settings.timeout,
                    max_output=1 << 20,
                    name="helm dependency build",
                )
            except RenderError as exc:
                raise RenderError(
                    f"chart dependencies {', '.join(missing)} are not in charts/ and `helm dependency build` failed; "
                    "vendor them into charts/ (run `helm dependency build` and commit charts/)",
                    stderr=exc.stderr,
                ) from exc
        argv = helm_argv(helm, job, values_files=values_files(job))
        plannable = not missing and not job.env.param("values").strip()
        run = start_tool(job, argv, env=env, name="helm template", plannable=plannable)
        return ToolRender(run, self.name)


def values_files(job: RenderJob) -> list[Path]:
    """The values files in order, confined to the checkout, then the inline values as a last file."""
    files = [confined(job, f, what="values-files entry") for f in job.env.param("values-files")]
    inline = job.env.param("values")
    if inline.strip():
        import yaml

        from driftguard.manifests import safe_load

        try:
            parsed = safe_load(inline)
        except yaml.YAMLError as exc:
            raise InputError(f"parameter values is not valid YAML: {exc}") from exc
        if parsed is not None and not isinstance(parsed, dict):
            raise InputError("parameter values must be a YAML mapping of values")
        path = job.scratch / "inline-values.yaml"
        path.write_text(inline)
        files.append(path)
    return files


_RELEASE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""Helm's own rule for a release name (helm pkg/chartutil/validate_name.go, ``ValidateReleaseName``)."""

MAX_RELEASE_NAME = 53


def release_name(job: RenderJob) -> str:
    """The release name, refused unless helm would accept it as it stands.

    ``--name-template`` is the only way ``helm template`` takes a name, and helm evaluates it as a
    Go template with sprig's functions, ``env`` included, before it checks the result. The name
    comes from the app's name (in ``render``, its directory; in ``diff``, the PR's Application
    manifest), so a name like ``{{ env "HTTPS_PROXY" }}`` would have helm print the plugin's
    environment in its error. A name that already is a valid release name has no template in it.
    """
    name = job.env.release_name
    if len(name) > MAX_RELEASE_NAME or not _RELEASE_NAME.fullmatch(name):
        shown = name if len(name) <= 80 and name.isprintable() else repr(name[:80]) + "..."
        raise InputError(
            f"the release name {shown} is not a valid Helm release name (lowercase letters, digits, '-' "
            f"and '.', at most {MAX_RELEASE_NAME} characters); name the Application so, or set the "
            "release-name parameter"
        )
    return name


def helm_argv(helm: str, job: RenderJob, *, values_files: list[Path]) -> list[str]:
    """``helm template <app dir>`` with Argo CD's native flags (Argo CD runs ``helm template .`` there: same output)."""
    env = job.env
    argv = [
        helm,
        "template",
        str(job.app_dir),
        "--name-template",
        release_name(job),
        "--namespace",
        env.namespace,
    ]
    if env.kube_version:
        argv += ["--kube-version", env.kube_version]
    for f in values_files:
        argv += ["--values", str(f)]
    for api in env.api_versions:
        argv += ["--api-versions", api]
    if env.param("include-crds"):
        argv.append("--include-crds")
    return argv


def missing_dependencies(chart_dir: Path) -> list[str]:
    """Dependencies declared in Chart.yaml that charts/ does not hold (as a directory or a .tgz)."""
    try:
        text = (chart_dir / "Chart.yaml").read_text()
    except OSError as exc:
        raise InputError(f"Chart.yaml cannot be read: {exc.strerror}") from exc
    if "dependencies" not in text:
        return []
    import yaml

    from driftguard.manifests import safe_load

    try:
        chart: Any = safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"Chart.yaml is not valid YAML: {exc}") from exc
    deps = chart.get("dependencies") if isinstance(chart, dict) else None
    if not isinstance(deps, list):
        return []
    charts = chart_dir / "charts"
    missing = []
    for dep in deps:
        if not isinstance(dep, dict) or not dep.get("name"):
            continue
        name = str(dep["name"])
        if (charts / name / "Chart.yaml").is_file() or list(charts.glob(f"{name}-*.tgz")):
            continue
        missing.append(name)
    return missing

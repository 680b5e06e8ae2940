"""Helm: ``helm template`` with the flags Argo CD passes natively."""

from __future__ import annotations

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
            _build_dependencies(helm, job, env, missing)
        argv = helm_argv(helm, job, values_files=values_files(job))
        plannable = not missing and not job.env.param("values").strip()
        run = start_tool(job, argv, env=env, name="helm template", plannable=plannable)
        return ToolRender(run, self.name)


def _build_dependencies(helm: str, job: RenderJob, env: dict[str, str], missing: list[str]) -> None:
    """``helm dependency build`` for missing dependencies; when it fails, helm's own error as Argo CD shows it.

    Argo CD runs ``helm template`` first and ``helm dependency build`` only when helm reports missing
    dependencies (reposerver/repository/repository.go, ``helmTemplate`` / ``runHelmBuild``, v3.5.1).
    Here the check comes first (no template run is wasted), and when the build fails (no network, a
    private repository) the template is run after all: its error is what the user sees in Argo CD,
    and should helm find the chart complete after all, the render goes on.
    """
    try:
        run_tool(
            [helm, "dependency", "build", str(job.app_dir), "--skip-refresh"],
            env=env,
            timeout=job.settings.timeout,
            max_output=1 << 20,
            name="helm dependency build",
        )
        return
    except RenderError as build:
        failure = build
    try:
        run_tool(
            helm_argv(helm, job, values_files=values_files(job)),
            env=env,
            timeout=job.settings.timeout,
            max_output=job.settings.max_output_bytes,
            name="helm template",
        )
    except RenderError as template:
        raise RenderError(
            f"chart dependencies {', '.join(missing)} are not in charts/ and `helm dependency build` failed; "
            "vendor them into charts/ (run `helm dependency build` and commit charts/)",
            stderr=f"{template.stderr.rstrip()}\nhelm dependency build: {failure.stderr.strip()}".strip(),
        ) from failure


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


def helm_argv(helm: str, job: RenderJob, *, values_files: list[Path]) -> list[str]:
    """``helm template <app dir>`` with Argo CD's native flags (Argo CD runs ``helm template .`` there: same output)."""
    env = job.env
    argv = [
        helm,
        "template",
        str(job.app_dir),
        "--name-template",
        env.release_name,
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
    if missing:  # helm matches by the name inside each charts/ entry, whatever the entry is called
        present = vendored_chart_names(charts)
        missing = [name for name in missing if name not in present]
    return missing


def vendored_chart_names(charts: Path) -> set[str]:
    """The ``name`` of every chart in ``charts/`` (directories and .tgz archives), as helm loads them."""
    import tarfile

    import yaml

    from driftguard.manifests import safe_load

    names: set[str] = set()
    try:
        entries = sorted(charts.iterdir())
    except OSError:
        return names
    for entry in entries:
        text = ""
        try:
            if entry.is_dir() and (entry / "Chart.yaml").is_file():
                text = (entry / "Chart.yaml").read_text()
            elif entry.is_file() and entry.name.endswith((".tgz", ".tar.gz")):
                with tarfile.open(entry, "r:gz") as tar:
                    for member in tar:
                        if (
                            member.isfile()
                            and member.name.count("/") == 1
                            and member.name.endswith("/Chart.yaml")
                        ):
                            f = tar.extractfile(member)
                            text = f.read(1 << 20).decode("utf-8", "replace") if f else ""
                            break
            chart = safe_load(text) if text else None
        except (OSError, EOFError, tarfile.TarError, yaml.YAMLError):
            chart = None  # an unreadable entry names no chart; helm then reports it
        if isinstance(chart, dict) and isinstance(chart.get("name"), str):
            names.add(chart["name"])
    return names

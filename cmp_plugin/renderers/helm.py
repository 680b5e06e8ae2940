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
            from cmp_plugin import helm_repos

            flags = helm_repos.prepare(read_chart(job.app_dir), missing, settings=job.settings, env=env)
            _build_dependencies(helm, job, env, missing, flags)
        argv = helm_argv(helm, job, values_files=values_files(job))
        plannable = not missing and not job.env.param("values").strip()
        run = start_tool(job, argv, env=env, name="helm template", plannable=plannable)
        return ToolRender(run, self.name)


def _build_dependencies(
    helm: str, job: RenderJob, env: dict[str, str], missing: list[str], flags: list[str]
) -> None:
    """``helm dependency build`` for missing dependencies; when it fails, helm's own error as Argo CD shows it.

    Argo CD runs ``helm template`` first and ``helm dependency build`` only when helm reports missing
    dependencies (reposerver/repository/repository.go, ``helmTemplate`` / ``runHelmBuild``, v3.5.1).
    Here the check comes first (no template run is wasted), and when the build fails (no network, a
    private repository) the template is run after all: its error is what the user sees in Argo CD,
    and should helm find the chart complete after all, the render goes on.
    """
    from cmp_plugin import helm_repos

    step = "helm dependency build"
    try:
        step = "helm repo update"  # the repositories first, as Argo CD adds them (helm repo add)
        helm_repos.update_indexes(helm, env, timeout=job.settings.timeout)
        step = "helm dependency build"
        run_tool(
            [helm, "dependency", "build", str(job.app_dir), *flags],
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
        if step == "helm repo update":
            head = f"{failure}; chart dependencies {', '.join(missing)} are not in charts/"
        else:
            head = (
                f"chart dependencies {', '.join(missing)} are not in charts/ and `helm dependency build` "
                "failed; vendor them into charts/ (run `helm dependency build` and commit charts/)"
            )
        raise RenderError(
            head, stderr=f"{template.stderr.rstrip()}\n{step}: {failure.stderr.strip()}".strip()
        ) from failure


def existing_values_files(job: RenderJob) -> list[tuple[str, Path]]:
    """(entry, path) of each values-files entry, confined to the checkout.

    With ``ignore-missing-values-files`` an entry that does not exist is left out, as Argo CD does
    (reposerver/repository/repository.go, ``getResolvedValueFiles``); one outside the checkout is
    refused all the same.
    """
    out = []
    ignore = job.env.param("ignore-missing-values-files")
    root = job.repo_root.resolve()
    for entry in job.env.param("values-files"):
        try:
            out.append((entry, confined(job, entry, what="values-files entry")))
        except InputError:
            if not ignore or not entry.strip() or Path(entry).is_absolute():
                raise
            resolved = (job.app_dir / entry).resolve()
            if not resolved.is_relative_to(root) or resolved.exists():
                raise
    return out


def values_files(job: RenderJob) -> list[Path]:
    """The values files in order, confined to the checkout, then the inline values as a last file."""
    files = [path for _, path in existing_values_files(job)]
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
    kube_version = env.param("kube-version") or env.kube_version
    if kube_version:
        argv += ["--kube-version", kube_version]
    # the order of util/helm/cmd.go (template): --set, --set-string, --set-file, --values, ...;
    # helm applies values files before any --set whatever the order (keys sorted here, where Argo
    # CD walks a Go map)
    for flag, name in (("--set", "set"), ("--set-string", "set-string")):
        for key, value in sorted(env.param(name).items()):
            argv += [flag, f"{key}={_clean_set_value(value)}"]
    for key, path in sorted(env.param("set-file").items()):
        argv += ["--set-file", f"{key}={confined(job, path, what=f'set-file {key}')}"]
    for f in values_files:
        argv += ["--values", str(f)]
    for api in env.param("api-versions") or env.api_versions:
        argv += ["--api-versions", api]
    if env.param("include-crds") and not env.param("skip-crds"):
        argv.append("--include-crds")
    if env.param("skip-schema-validation"):
        argv.append("--skip-schema-validation")
    if env.param("skip-tests"):
        argv.append("--skip-tests")
    return argv


def set_values(job: RenderJob) -> dict[str, Any]:
    """What the set / set-string / set-file parameters supply, as nested values (for the guards).

    Plain dotted keys only (``a.b``, ``a\\.b``): a key with a list index counts for its parent.
    --set values are typed the way helm's strvals types them (true/false/null/integers).
    """
    out: dict[str, Any] = {}
    items = [(k, _strval(v)) for k, v in job.env.param("set").items()]
    items += list(job.env.param("set-string").items()) + [(k, "<file>") for k in job.env.param("set-file")]
    for key, value in items:
        parts = [p.replace("\\.", ".") for p in re.split(r"(?<!\\)\.", key.split("[", 1)[0])]
        node = out
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = [value] if "[" in key else value
    return out


def _strval(value: str) -> Any:
    if value in ("true", "false"):
        return value == "true"
    if value == "null":
        return None
    if re.fullmatch(r"-?[0-9]+", value) and not re.fullmatch(r"-?0[0-9]+", value):
        return int(value)
    return value


def _clean_set_value(value: str) -> str:
    """Argo CD's cleanSetParameters (util/helm/cmd.go): escape each comma not already escaped, so
    helm does not split the value, except in a ``{a,b}`` list."""
    if value.startswith("{") and value.endswith("}"):
        return value
    out, prev = [], ""
    for ch in value:
        out.append("\\," if ch == "," and prev != "\\" else ch)
        prev = ch
    return "".join(out)


def read_chart(chart_dir: Path) -> Any:
    """Chart.yaml, parsed as Argo CD's Go YAML reads it."""
    try:
        text = (chart_dir / "Chart.yaml").read_text()
    except OSError as exc:
        raise InputError(f"Chart.yaml cannot be read: {exc.strerror}") from exc
    import yaml

    from driftguard.manifests import safe_load

    try:
        return safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"Chart.yaml is not valid YAML: {exc}") from exc


def missing_dependencies(chart_dir: Path) -> list[str]:
    """Dependencies declared in Chart.yaml that charts/ does not hold (as a directory or a .tgz)."""
    try:
        text = (chart_dir / "Chart.yaml").read_text()
    except OSError as exc:
        raise InputError(f"Chart.yaml cannot be read: {exc.strerror}") from exc
    if "dependencies" not in text:
        return []
    chart = read_chart(chart_dir)
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

"""Nothing outside the checkout is read: every file a render will read resolves inside the repository.

Argo CD's repo-server refuses a checkout holding a symlink that is absolute or leads outside it
before any render (argoproj/argo-cd ``util/app/path/path.go``, ``CheckOutOfBoundsSymlinks``), but
``driftguard-cmp render`` and ``diff`` run on laptops and in CI without it, and the sidecar should
not depend on it alone. So before the tool starts we walk what the tool will read: the chart
directory (helm loads every file in it, following symlinks), the plain-manifest directory, and for
kustomize every directory and file its kustomization files name. A symlink that resolves outside
the repository root is refused, whatever it points at, and so is a path parameter that leaves it.
The refusal names the path inside the checkout, never the target's content.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cmp_plugin import helm_inflation
from driftguard.errors import InputError
from driftguard.gostruct import GoStruct, go_struct

__all__ = ["Inputs", "check_app_dir", "check_render_inputs", "check_tree", "inside", "locked_dependencies"]


class Inputs:
    """What the walk below found a render will read, for the render fingerprint (cmp_plugin/fingerprint.py).

    ``trees``: directories read whole (a chart, a kustomization's directory), ``files``: single
    files named from elsewhere; ``unseen``: why the render may read something no file here holds
    (a remote base, a chart fetched by kustomize's helm inflation): such a render is not cached.
    """

    def __init__(self) -> None:
        self.trees: list[str] = []
        self.files: list[str] = []
        self.unseen: list[str] = []


MAX_ENTRIES = 200_000
"""Directory entries walked for one render: beyond this the checkout is refused, not walked for ever."""

_KUSTOMIZE_MARKERS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_DIR_FIELDS = ("resources", "bases", "components")
_FILE_FIELDS = (
    "crds",
    "configurations",
    "generators",
    "transformers",
    "validators",
    "patchesStrategicMerge",
)


def inside(path: str, root: str) -> bool:
    """Whether the real ``path`` is ``root`` or below it (``root`` already real)."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip("/") + "/")


def _rel(path: str, root: str) -> str:
    return os.path.relpath(path, root) if path.startswith(root) else os.path.basename(path)


def check_app_dir(app_dir: Path, repo_root: Path) -> None:
    """The app directory itself must resolve inside the checkout (a symlinked app path is refused)."""
    root = os.path.realpath(repo_root)
    if not inside(str(app_dir), root):
        raise InputError(
            f"the app directory {app_dir.name} resolves outside the repository checkout "
            "(a symlink on its path leads out); refusing to render it"
        )


def check_generate_path(cwd: str, source_path: str) -> None:
    """In ``generate``, the real working directory must end with ``ARGOCD_APP_SOURCE_PATH``.

    argocd-cmp-server runs the command in ``<checkout>/<source path>``; when the real directory does
    not end with that path, a symlink on the way led somewhere else.
    """
    parts = [p for p in source_path.split("/") if p not in ("", ".")]
    here = os.path.realpath(cwd).rstrip("/").split("/")
    if parts and here[-len(parts) :] != parts:
        raise InputError(
            f"the app directory {source_path!r} is reached through a symlink (the real directory is not "
            "<checkout>/ARGOCD_APP_SOURCE_PATH); refusing to render it"
        )


def check_tree(top: Path, repo_root: Path, *, what: str) -> None:
    """Refuse when ``top``, or any symlink below it (followed as the tools follow it), leads outside."""
    root = os.path.realpath(repo_root)
    start = os.path.realpath(top)
    if not inside(start, root):
        raise InputError(f"{what} {_rel(str(top), root)} resolves outside the repository checkout")
    seen = {start}
    stack = [start]
    entries = 0
    while stack:
        current = stack.pop()
        try:
            listing = list(os.scandir(current))
        except OSError:
            continue  # unreadable to us is unreadable to the tool: it fails on its own
        for entry in listing:
            entries += 1
            if entries > MAX_ENTRIES:
                raise InputError(f"{what} holds more than {MAX_ENTRIES} files and directories")
            if entry.is_symlink():
                real = os.path.realpath(entry.path)
                if not inside(real, root):
                    raise InputError(
                        f"{what}: {_rel(entry.path, root)} is a symlink that leads outside the repository "
                        "checkout; remove it or replace it with the file itself"
                    )
                if os.path.isdir(real) and real not in seen:
                    seen.add(real)
                    stack.append(real)
            elif entry.is_dir(follow_symlinks=False) and entry.name != ".git":
                stack.append(entry.path)


def check_render_inputs(app_dir: Path, repo_root: Path, renderer: str, inputs: Inputs | None = None) -> None:
    """Every file the chosen renderer will read is inside the checkout; InputError otherwise.

    With ``inputs``, what was walked is recorded there (the render fingerprint hashes it).
    """
    check_app_dir(app_dir, repo_root)
    if renderer == "kustomize":
        _check_kustomize(app_dir, repo_root, inputs)
        return
    if inputs is not None:
        inputs.trees.append(os.path.realpath(app_dir))
    if renderer == "directory":
        return  # the walk checks each file it reads, as Argo CD does (cmp_plugin/dirsource.py)
    what = {"helm": "the chart", "directory": "the manifest directory"}.get(renderer, "the app directory")
    check_tree(app_dir, repo_root, what=what)
    if renderer == "helm":
        from cmp_plugin.helmchart.schema_refs import check_chart_schemas

        _check_chart_dependencies(app_dir, repo_root, inputs)
        check_chart_schemas(app_dir, os.path.realpath(repo_root))


def _may_name_a_file(text: str) -> bool:
    """Whether a ``file://`` repository can be in ``text``: written out, or spelled with escapes or a
    tag (``!!binary``); helm's test is a case-sensitive prefix (pkg/downloader/manager.go)."""
    return "file://" in text or "\\" in text or "!" in text


def chart_dependencies(chart_dir: Path, *, only_files: bool = False) -> list[GoStruct]:
    """The dependencies helm reads: Chart.yaml's, and requirements.yaml's (read whatever the apiVersion).

    Field names as Go reads them (driftguard/gostruct.py): ``Dependencies:`` / ``Repository:`` are
    helm's ``dependencies`` / ``repository`` (sigs.k8s.io/yaml into chart.Metadata; helm
    pkg/chart/loader/load.go unmarshals requirements.yaml into the same Metadata).
    With ``only_files``, a file that cannot name a ``file://`` repository is not parsed.
    """
    return [dep for _, dep in _dependencies(chart_dir, ("Chart.yaml", "requirements.yaml"), only_files)]


def _dependencies(chart_dir: Path, names: tuple[str, ...], only_files: bool) -> list[tuple[str, GoStruct]]:
    out: list[tuple[str, GoStruct]] = []
    for name in names:
        try:
            text = (chart_dir / name).read_text()
        except OSError:
            continue
        if only_files and not _may_name_a_file(text):
            continue
        doc = go_struct(_load_yaml(text, name), name)
        deps = doc.get("dependencies") if doc is not None else None
        out += [(name, d) for d in deps if isinstance(d, GoStruct)] if isinstance(deps, list) else []
    return out


# helm dependency build downloads the lock's dependencies, not Chart.yaml's, once the lock's digest
# (which the tenant writes too) matches: pkg/downloader/manager.go Build, downloadAll(lock.Dependencies)
_DEPENDENCY_FILES = ("Chart.yaml", "requirements.yaml", "Chart.lock", "requirements.lock")


def locked_dependencies(chart_dir: Path) -> list[GoStruct]:
    """Every dependency ``helm dependency build`` may fetch: Chart.yaml's, requirements.yaml's and the locks'."""
    return [dep for _, dep in _dependencies(chart_dir, _DEPENDENCY_FILES, False)]


def _check_chart_dependencies(chart_dir: Path, repo_root: Path, inputs: Inputs | None = None) -> None:
    """``file://`` dependencies (copied in by ``helm dependency build``) must be in the checkout too."""
    for origin, dep in _dependencies(chart_dir, _DEPENDENCY_FILES, True):
        repo = str(dep.get("repository") or "")
        if repo.startswith("file://"):
            target = chart_dir / repo[len("file://") :]
            if not inside(str(target), os.path.realpath(repo_root)):
                raise InputError(
                    f"{origin} dependency {dep.get('name')!r}: {repo} leads outside the repository checkout"
                )
            check_tree(target, repo_root, what=f"chart dependency {dep.get('name')!r}")
            if inputs is not None:
                inputs.trees.append(os.path.realpath(target))
            from cmp_plugin.helmchart.schema_refs import check_chart_schemas

            check_chart_schemas(target, os.path.realpath(repo_root))


def _load_yaml(text: str, origin: str) -> Any:
    import yaml

    from driftguard.manifests import safe_load

    try:
        return safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{origin} is not valid YAML: {exc}") from exc


def _check_kustomize(app_dir: Path, repo_root: Path, inputs: Inputs | None = None) -> None:
    """Walk the kustomization graph: each directory it builds, each file it names, all inside.

    A ``generators``/``transformers``/``validators`` entry is a builtin plugin's config (a file, a
    directory whose resources are configs, or the config inline), and the config names files of its
    own (``ConfigMapGenerator`` ``files``/``envs``, ``PatchTransformer`` ``path``, ...): those are
    read too. Kustomize's ``LoadRestrictionsRootOnly`` refuses them when they leave the
    kustomization's root, but the platform may open the restrictor; the checkout still holds.
    """
    root = os.path.realpath(repo_root)
    todo: list[tuple[str, bool]] = [(os.path.realpath(app_dir), False)]
    done: set[tuple[str, bool]] = set()
    while todo:
        here, configs = todo.pop()
        if (here, configs) in done:
            continue
        done.add((here, configs))
        check_tree(Path(here), repo_root, what="the kustomization")
        if inputs is not None:
            inputs.trees.append(here)
        marker = next((m for m in _KUSTOMIZE_MARKERS if os.path.isfile(os.path.join(here, m))), None)
        if marker is None:
            continue
        origin = _rel(os.path.join(here, marker), root)
        with open(os.path.join(here, marker), encoding="utf-8", errors="replace") as f:
            doc = go_struct(_load_yaml(f.read(), origin), origin)  # Go's case-insensitive fields
        if doc is None:
            continue
        helm_inflation.check_kustomization(doc, here, root, origin)
        if inputs is not None and doc.get("helmCharts"):
            inputs.unseen.append(f"{origin} inflates helm charts (kustomize may fetch them)")
        plugin_entries = {e for field in _PLUGIN_FIELDS for e in (doc.get(field) or []) if isinstance(e, str)}
        if configs:  # a directory a generators/transformers entry named: its resources are configs
            plugin_entries |= {e for e in doc.get("resources") or [] if isinstance(e, str)}
        for inline in (e for e in plugin_entries if "\n" in e):
            _check_configs(inline, here, root, origin, inputs)  # a config written in the kustomization itself
        for ref in _references(doc):
            if "\n" in ref:
                continue  # an inline config or patch, not a path
            target = os.path.join(here, ref)
            if not os.path.lexists(target):
                if inputs is not None:
                    inputs.unseen.append(f"{origin} refers to {ref!r}, which is not a file in the checkout")
                continue  # a remote base, or missing: kustomize fetches or fails on its own
            if not inside(target, root):
                raise InputError(f"{origin} refers to {ref!r}, which leads outside the repository checkout")
            is_config = ref in plugin_entries
            if os.path.isdir(target):
                todo.append((os.path.realpath(target), is_config))
            else:
                if inputs is not None:
                    inputs.files.append(os.path.realpath(target))
                if is_config:
                    with open(target, encoding="utf-8", errors="replace") as f:
                        _check_configs(f.read(), here, root, _rel(target, root), inputs)


_PLUGIN_FIELDS = ("generators", "transformers", "validators")


def _check_configs(
    text: str, kustomization_dir: str, root: str, origin: str, inputs: Inputs | None = None
) -> None:
    """Every file a builtin plugin config names stays inside the checkout (relative to its kustomization)."""
    import yaml

    from driftguard.manifests import safe_load, split_documents

    try:
        docs = [safe_load(chunk) for _, chunk in split_documents(text)]
    except yaml.YAMLError as exc:
        raise InputError(f"{origin} is not valid YAML: {exc}") from exc
    for raw in docs:
        config = go_struct(raw, origin)
        if config is None:
            continue
        helm_inflation.check_config(config, kustomization_dir, root, origin)
        if inputs is not None and str(config.get("kind") or "") == "HelmChartInflationGenerator":
            inputs.unseen.append(f"{origin} inflates a helm chart (kustomize may fetch it)")
        for ref in _config_references(config):
            target = os.path.join(kustomization_dir, ref)
            if inputs is not None:
                if os.path.isdir(target):
                    inputs.trees.append(os.path.realpath(target))
                elif os.path.lexists(target):
                    inputs.files.append(os.path.realpath(target))
                else:
                    inputs.unseen.append(f"{origin} refers to {ref!r}, which is not a file in the checkout")
            if not inside(target, root):
                raise InputError(
                    f"{origin}: the {config.get('kind') or 'plugin'} config refers to {ref!r}, which leads "
                    "outside the repository checkout"
                )


def _config_references(config: GoStruct) -> list[str]:
    """The files a builtin generator's or transformer's config names (kustomize api/builtins, api/types)."""
    out: list[str] = []

    def add(value: Any, *, keyed: bool = False) -> None:
        if isinstance(value, str) and value.strip():
            out.append(value.split("=", 1)[-1] if keyed and "=" in value else value)

    for key in ("files", "envs", "paths", "additionalValuesFiles"):  # ConfigMap/SecretGenerator, PSM, helm
        items = config.get(key)
        for item in items if isinstance(items, list) else []:
            add(item.get("path") if isinstance(item, GoStruct) else item, keyed=key == "files")
    for key in ("env", "path", "valuesFile", "chartHome", "configHome"):  # PatchTransformer, helm, ...
        add(config.get(key))
    items = config.get("replacements")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, GoStruct):
            add(item.get("path"))
    return out


def _references(doc: GoStruct) -> list[str]:
    """Every local path a kustomization may read (files, directories), as written."""
    out: list[str] = []

    # only a generator's ``files`` entry is ``[key=]path`` (kustomize api/kv ParseFileSource);
    # every other path is read as written, an ``=`` in it included
    def add(value: Any, *, keyed: bool = False) -> None:
        if isinstance(value, str) and value.strip():
            out.append(value.split("=", 1)[-1] if keyed and "=" in value else value)

    for field in (*_DIR_FIELDS, *_FILE_FIELDS):
        items = doc.get(field)
        for item in items if isinstance(items, list) else []:
            add(item.get("path") if isinstance(item, GoStruct) else item)
    for field in ("patches", "patchesJson6902", "replacements"):
        items = doc.get(field)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, GoStruct):
                add(item.get("path"))
    for field in ("configMapGenerator", "secretGenerator"):
        items = doc.get(field)
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, GoStruct):
                continue
            for key in ("files", "envs"):
                for value in item.get(key) or [] if isinstance(item.get(key), list) else []:
                    add(value, keyed=key == "files")
            add(item.get("env"))
    for item in doc.get("helmCharts") or [] if isinstance(doc.get("helmCharts"), list) else []:
        if isinstance(item, GoStruct):
            add(item.get("valuesFile"))
            for value in item.get("additionalValuesFiles") or []:
                add(value)
    globals_ = doc.get("helmGlobals")
    if isinstance(globals_, GoStruct):
        add(globals_.get("chartHome"))
    openapi = doc.get("openapi")
    if isinstance(openapi, GoStruct):
        add(openapi.get("path"))
    return out

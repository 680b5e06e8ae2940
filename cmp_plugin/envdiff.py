"""``driftguard-cmp diff``: every environment rendered at two revisions, destructive changes first.

A target is an Argo CD Application manifest, a directory or glob of them, or a bare app path.
Each Application is one environment: its source path and plugin parameters (one chart with
per-environment values files becomes several environments). Both revisions are checked out as
git worktrees in a temporary directory; the user's checkout is never touched.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmp_plugin import pipeline
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.guards.implicit_defaults import Finding, analyse
from cmp_plugin.renderers.base import RenderJob
from cmp_plugin.settings import CmpSettings
from driftguard.errors import DriftguardError, InputError
from driftguard.manifests import ResourceKey, load_stream, resource_key

__all__ = ["EnvDiff", "Environment", "diff_revisions", "render_report"]


@dataclass(frozen=True)
class Environment:
    """One thing Argo CD renders: an Application (or a bare path) with its plugin parameters."""

    name: str
    path: str
    """Source path, relative to the repository root."""
    namespace: str = ""
    parameters: tuple[tuple[str, Any], ...] = ()


@dataclass
class Change:
    key: ResourceKey
    cause: str = ""


@dataclass
class EnvDiff:
    env: Environment
    removed: list[Change] = field(default_factory=list)
    added: list[Change] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    """revision label (base/head) -> why it could not be rendered."""

    def to_json(self) -> dict[str, Any]:
        def items(changes: list[Change]) -> list[dict[str, Any]]:
            return [
                {
                    "resource": str(c.key),
                    "group": c.key.group,
                    "kind": c.key.kind,
                    "namespace": c.key.namespace,
                    "name": c.key.name,
                    "cause": c.cause,
                }
                for c in changes
            ]

        return {
            "name": self.env.name,
            "path": self.env.path,
            "removed": items(self.removed),
            "added": items(self.added),
            "changed": items(self.changed),
            "errors": self.errors,
        }


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise InputError(f"git {' '.join(args)} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout.strip()


def diff_revisions(
    targets: list[str], *, base: str, head: str, cwd: Path, settings: CmpSettings
) -> tuple[list[EnvDiff], str, str]:
    """Render every environment at ``base`` and ``head``; (diffs with removals first, base sha, head sha)."""
    root = Path(git(cwd, "rev-parse", "--show-toplevel"))
    base_sha = git(root, "rev-parse", "--verify", f"{base}^{{commit}}")
    head_sha = git(root, "rev-parse", "--verify", f"{head}^{{commit}}")
    rel_targets = [_relative(t, cwd, root) for t in targets]
    with tempfile.TemporaryDirectory(prefix="driftguard-diff-") as tmp:
        trees = {}
        try:
            for label, sha in (("base", base_sha), ("head", head_sha)):
                trees[label] = Path(tmp) / label
                git(root, "worktree", "add", "--detach", "--quiet", str(trees[label]), sha)
            envs = _environments(rel_targets, trees["head"]) | _environments(rel_targets, trees["base"])
            if not envs:
                raise InputError(f"no Application manifests or app directories found in {', '.join(targets)}")
            diffs = [_diff_env(env, trees, settings) for env in sorted(envs.values(), key=lambda e: e.name)]
        finally:
            for tree in trees.values():
                subprocess.run(
                    ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                    capture_output=True,
                    check=False,
                )
                shutil.rmtree(tree, ignore_errors=True)
    diffs.sort(key=lambda d: (not d.errors.get("head"), not d.removed, d.env.name))
    return diffs, base_sha, head_sha


def _relative(target: str, cwd: Path, root: Path) -> str:
    """A target (path or glob, relative to where the user stands) relative to the repository root."""
    where = Path(os.path.normpath(cwd.resolve() / target))
    if not where.is_relative_to(root.resolve()):
        raise InputError(f"target {target} is outside the repository {root}")
    return str(where.relative_to(root.resolve()))


def _environments(targets: list[str], tree: Path) -> dict[str, Environment]:
    envs: dict[str, Environment] = {}
    for target in targets:
        matches = sorted(tree.glob(target)) if any(ch in target for ch in "*?[") else [tree / target]
        for path in matches:
            if path.is_file():
                envs.update(_apps_in(path, tree))
            elif path.is_dir():
                apps: dict[str, Environment] = {}
                for f in sorted(path.glob("*.yaml")) + sorted(path.glob("*.yml")):
                    apps.update(_apps_in(f, tree))
                if apps:
                    envs.update(apps)
                else:
                    rel = str(path.relative_to(tree))
                    envs[rel] = Environment(rel, rel)
    return envs


def _apps_in(path: Path, tree: Path) -> dict[str, Environment]:
    out = {}
    try:
        docs = load_stream(path.read_bytes(), source=str(path.relative_to(tree)))
    except DriftguardError:
        return {}
    for doc in docs:
        app = doc.obj
        if app.get("kind") != "Application" or not str(app.get("apiVersion", "")).startswith("argoproj.io/"):
            continue
        spec = app.get("spec") or {}
        source = spec.get("source") or {}
        if not isinstance(source, dict) or "path" not in source:
            continue
        plugin = source.get("plugin") or {}
        params = []
        for p in plugin.get("parameters") or [] if isinstance(plugin, dict) else []:
            if isinstance(p, dict) and "name" in p:
                value = p.get("array", p.get("map", p.get("string", "")))
                params.append((str(p["name"]), value))
        name = str((app.get("metadata") or {}).get("name", path.stem))
        namespace = str((spec.get("destination") or {}).get("namespace") or "")
        out[name] = Environment(name, str(source["path"]).strip("/") or ".", namespace, tuple(params))
    return out


def _render(
    env: Environment, tree: Path, settings: CmpSettings
) -> tuple[dict[ResourceKey, dict[str, Any]], dict[ResourceKey, str], list[Finding]]:
    """Objects by key, their template source, and the implicit-defaults findings, at one revision."""
    app_dir = tree / env.path
    if not app_dir.is_dir():
        return {}, {}, []
    params, explicit = parse_parameters({}, dict(env.parameters))
    app_name = (
        env.name if env.name != env.path else Path(env.path).name
    )  # a bare path: release named like its directory
    app_env = AppEnv(
        app_name=app_name, app_namespace=env.namespace, params=params, explicit=explicit, source_path=env.path
    )
    outcome = pipeline.run(app_dir, repo_root=tree, env=app_env, settings=settings, guards=())
    objects: dict[ResourceKey, dict[str, Any]] = {}
    sources: dict[ResourceKey, str] = {}
    for doc in load_stream(outcome.text, source=env.path):
        key = resource_key(doc.obj, default_namespace=app_env.namespace)
        objects[key] = doc.obj
    for key, scanned in zip(outcome.keys, outcome.docs, strict=True):
        sources[key] = scanned.source
    findings: list[Finding] = []
    if outcome.renderer == "helm":
        with tempfile.TemporaryDirectory() as scratch:
            findings = analyse(RenderJob(app_dir, tree, app_env, settings, Path(scratch)), outcome.docs)
    return objects, sources, findings


def _diff_env(env: Environment, trees: dict[str, Path], settings: CmpSettings) -> EnvDiff:
    out = EnvDiff(env)
    rendered = {}
    for label, tree in trees.items():
        try:
            rendered[label] = _render(env, tree, settings)
        except DriftguardError as exc:
            detail = getattr(exc, "stderr", "") or ""
            out.errors[label] = str(exc).splitlines()[0] + (
                f": {detail.strip().splitlines()[-1]}" if detail.strip() else ""
            )
            rendered[label] = ({}, {}, [])
    (b_obj, b_src, b_find), (h_obj, _, h_find) = rendered["base"], rendered["head"]
    if "head" in out.errors:
        return out
    for key in sorted(b_obj.keys() - h_obj.keys()):
        out.removed.append(Change(key, _cause(key, b_src.get(key, ""), b_find, h_find)))
    out.added = [Change(k) for k in sorted(h_obj.keys() - b_obj.keys())]
    out.changed = [Change(k) for k in sorted(b_obj.keys() & h_obj.keys()) if b_obj[k] != h_obj[k]]
    return out


def _cause(key: ResourceKey, source: str, before: list[Finding], after: list[Finding]) -> str:
    """Why a resource disappeared, when a gating key explains it."""
    was = {(f.gate.key, f.gate.file): f for f in before}
    for f in after:
        old = was.get((f.gate.key, f.gate.file))
        if f.renders is not False or (old is not None and old.renders is False):
            continue
        kinds = {r.split(" ", 1)[0] for r in f.gate.resources}
        rel = source.split("/", 1)[1] if "/" in source else source
        in_file = bool(source) and any(rel == s or rel.startswith(s + "/") for s in f.gate.sources)
        if not in_file or not (key.kind in kinds or "?" in kinds):
            continue
        where = f"{f.where()}: {f.quoted()}"  # the gate exactly as the template writes it
        if not f.explicit and old is not None and old.default != f.default:
            return f"the chart default of `{f.gate.key}` changed from {_v(old.default)} to {_v(f.default)} and this environment does not set it ({where})"
        if f.explicit and old is not None and old.value != f.value:
            return f"this environment's values changed `{f.gate.key}` from {_v(old.value)} to {_v(f.value)} ({where})"
        origin = "chart default" if not f.explicit else "value"
        return f"`{f.gate.key}` ({origin} {_v(f.value)}) now hides it ({where})"
    return ""


def _v(value: Any) -> str:
    return "unset" if value is None else json.dumps(value)


def failing(diffs: list[EnvDiff], patterns: list[str]) -> list[str]:
    """Environments matching a --fail-on-removal glob that would lose resources, or fail to render."""
    out = []
    for d in diffs:
        if any(fnmatch.fnmatchcase(d.env.name, p) for p in patterns) and (d.removed or "head" in d.errors):
            out.append(d.env.name)
    return out


def render_report(diffs: list[EnvDiff], *, base: str, head: str, fmt: str) -> str:
    if fmt == "json":
        return (
            json.dumps({"base": base, "head": head, "environments": [d.to_json() for d in diffs]}, indent=2)
            + "\n"
        )
    lines: list[str] = []
    md = fmt == "markdown"
    if md:
        lines += [f"## driftguard: rendered diff `{base[:12]}` -> `{head[:12]}`", ""]
        lines += ["| environment | removed | added | changed |", "|---|---:|---:|---:|"]
        for d in diffs:
            flag = " **(render failed)**" if "head" in d.errors else ""
            lines.append(f"| `{d.env.name}`{flag} | {len(d.removed)} | {len(d.added)} | {len(d.changed)} |")
        lines.append("")
    for d in diffs:
        header = f"{d.env.name} ({d.env.path}): {len(d.removed)} removed, {len(d.added)} added, {len(d.changed)} changed"
        lines.append(f"### {header}" if md else f"== {header}")
        for label, err in d.errors.items():
            lines.append(f"- render failed at {label}: {err}" if md else f"  ERROR at {label}: {err}")
        for title, changes in (("REMOVED", d.removed), ("ADDED", d.added), ("CHANGED", d.changed)):
            for c in changes:
                cause = f" <- {c.cause}" if c.cause else ""
                lines.append(
                    f"- **{title.lower()}** `{c.key}`{cause}" if md else f"  {title:8} {c.key}{cause}"
                )
        lines.append("")
    return "\n".join(lines)

"""codify's proof ground: the environment to edit, a copy of its checkout, renders and their diff.

``driftguard-cmp codify`` (codify.py) tries each candidate edit here: the copy holds the edit, the
environment renders as Argo CD would (the same pipeline as ``render``), and what the render must
then hold (``expected_objects``) is compared field by field (``surplus``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmp_plugin import pipeline
from cmp_plugin.argo_env import AppEnv
from cmp_plugin.repotools.codify_spec import Change, get_at, tokens
from cmp_plugin.settings import CmpSettings
from driftguard.diff import FieldChange, diff_objects, dumps
from driftguard.errors import InputError
from driftguard.manifests import ResourceKey, load_stream, resource_key

__all__ = [
    "Render",
    "Target",
    "Workspace",
    "expected_objects",
    "expected_value",
    "find_key",
    "proof_lines",
    "surplus",
]


@dataclass(frozen=True)
class Target:
    """The environment to edit: its app directory in the checkout, the checkout, its AppEnv."""

    app_dir: Path
    repo_root: Path
    env: AppEnv
    allow_chart: bool = False


# --- rendering in a copy of the checkout -----------------------------------------------------


class Render:
    """One render of the environment: objects by key, and where each came from."""

    def __init__(
        self, renderer: str, objects: dict[ResourceKey, dict[str, Any]], sources: dict[ResourceKey, str]
    ):
        self.renderer = renderer
        self.objects = objects
        self.sources = sources


class Workspace:
    """A copy of the checkout (tracked and untracked, not ignored, files) where candidates are tried."""

    def __init__(self, target: Target, settings: CmpSettings) -> None:
        self.target = target
        self.settings = settings
        self.tmp = Path(tempfile.mkdtemp(prefix="driftguard-codify-"))
        self.root = self.tmp / "repo"
        _copy_checkout(target.repo_root, self.root)
        self.app_dir = self.root / target.app_dir.relative_to(target.repo_root)
        self.edits: dict[Path, str] = {}
        self.originals: dict[Path, str] = {}

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def text(self, rel: Path) -> str:
        path = self.root / rel
        if rel in self.edits:
            return self.edits[rel]
        return path.read_text() if path.is_file() else ""

    def apply(self, edits: dict[Path, str]) -> None:
        """Make the copy hold ``edits`` (relative path -> text) on top of the originals."""
        for rel in set(self.edits) | set(edits):
            path = self.root / rel
            if rel not in self.originals:
                self.originals[rel] = path.read_text() if path.is_file() else ""
            text = edits.get(rel, self.originals[rel])
            if text == "" and self.originals[rel] == "" and path.exists():
                path.unlink()
            elif text != "" or path.exists():
                path.write_text(text)
        self.edits = dict(edits)

    def render(self) -> Render:
        env = self.target.env
        outcome = pipeline.run(self.app_dir, repo_root=self.root, env=env, settings=self.settings, guards=())
        objects: dict[ResourceKey, dict[str, Any]] = {}
        for doc in load_stream(outcome.text, source=str(self.app_dir.name)):
            objects[resource_key(doc.obj, default_namespace=env.namespace)] = doc.obj
        sources = {key: d.source for key, d in zip(outcome.keys, outcome.docs, strict=True)}
        return Render(outcome.renderer, objects, sources)


def _copy_checkout(src: Path, dest: Path) -> None:
    files: list[str] | None = None
    if (src / ".git").exists():
        proc = subprocess.run(
            ["git", "-C", str(src), "ls-files", "-z", "-c", "-o", "--exclude-standard"],
            capture_output=True,
            check=False,
        )
        if proc.returncode == 0:
            files = [f for f in proc.stdout.decode(errors="surrogateescape").split("\0") if f]
    if files is None:
        shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return
    for rel in files:
        s, d = src / rel, dest / rel
        if not os.path.lexists(s):
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_symlink():
            d.symlink_to(s.readlink())
        elif s.is_file():
            shutil.copy2(s, d)


# --- the proof -------------------------------------------------------------------------------


def find_key(render: Render, change: Change) -> ResourceKey:
    matches = [
        k
        for k in render.objects
        if k.kind == change.kind and k.namespace == change.namespace and k.name == change.name
    ]
    if not matches:
        raise InputError(
            f"{change.kind}/{change.namespace}/{change.name} is not in this environment's render "
            f"({len(render.objects)} resources)"
        )
    if len(matches) > 1:
        raise InputError(
            f"{change.kind}/{change.namespace}/{change.name} names {len(matches)} resources (groups differ)"
        )
    return matches[0]


def expected_value(old: Any, wanted: Any) -> Any:
    """The live value as the render must write it: a field Git writes as a string stays one."""
    if isinstance(old, str) and isinstance(wanted, int | float | bool) and not isinstance(wanted, bool):
        return str(wanted)
    if isinstance(old, str) and isinstance(wanted, bool):
        return "true" if wanted else "false"
    return wanted


def expected_objects(before: Render, changes: list[Change]) -> dict[ResourceKey, dict[str, Any]]:
    """The before-render with every requested value set: what the after-render must equal."""
    import copy

    out = dict(before.objects)
    for c in changes:
        key = find_key(before, c)
        obj = copy.deepcopy(out[key])
        _set_pointer(obj, tokens(c.pointer), expected_value(get_at(obj, tokens(c.pointer)), c.value))
        out[key] = obj
    return out


def _set_pointer(obj: Any, parts: list[str], value: Any) -> None:
    node = obj
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) > len(node):
                raise InputError(f"/{'/'.join(parts[: i + 1])}: no such list item in the render")
            idx = int(part)
            if last:
                if idx == len(node):
                    node.append(value)
                else:
                    node[idx] = value
                return
            node = node[idx]
        elif isinstance(node, dict):
            if last:
                node[part] = value
                return
            if part not in node or node[part] is None:
                node[part] = {}
            node = node[part]
        else:
            raise InputError(f"/{'/'.join(parts[:i])} is a scalar in the render; nothing goes under it")


def surplus(expected: dict[ResourceKey, dict[str, Any]], after: Render) -> list[str]:
    """What the after-render does differently from the request (empty: proven)."""
    out = []
    for key in sorted(expected.keys() | after.objects.keys()):
        if key not in after.objects:
            out.append(f"{key} would no longer render")
        elif key not in expected:
            out.append(f"{key} would newly render")
        else:
            out += [f"{key} {_fmt(fc)}" for fc in diff_objects(expected[key], after.objects[key])]
    return out


def proof_lines(before: Render, after: Render) -> list[str]:
    """The before/after field diff of the two renders, one line per field."""
    out = []
    for key in sorted(before.objects.keys() & after.objects.keys()):
        out += [
            f"{key} {fc.path}: {dumps(fc.old)} -> {dumps(fc.new)}"
            for fc in diff_objects(before.objects[key], after.objects[key])
        ]
    return out


def _fmt(fc: FieldChange) -> str:
    return f"{fc.path}: {dumps(fc.old)} wanted, {dumps(fc.new)} rendered"

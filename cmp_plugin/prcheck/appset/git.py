"""The git generator, directories and files (applicationset/generators/git.go), on this repository.

Argo CD asks its repo-server for the repository's directories (every directory but ``.git``,
symlinks not followed) or files at ``revision``; driftguard reads the checkout of the revision
being diffed, and only when ``repoURL`` is this repository: another repository is an error naming
it, never a silent skip. Directories match ``path.Match`` patterns (``*`` stays within one path
segment); an ``exclude: true`` pattern wins over any include. File patterns are git pathspecs
(Argo's default globbing: ``*`` also crosses ``/``).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
from pathlib import Path
from typing import Any

from cmp_plugin.confine import inside
from cmp_plugin.prcheck.appset.base import Context, Dropped, Generated, Nested, Origin, Params
from cmp_plugin.prcheck.appset.gofmt import flatten, format_v, path_match
from cmp_plugin.prcheck.appset.template import sanitize_name
from driftguard.errors import DriftguardError
from driftguard.manifests import safe_load

__all__ = ["GitGenerator", "normalize_url"]


def normalize_url(url: str) -> str:
    """A repository URL compared the way people mean it: scheme, user, ``.git`` and case of the host ignored."""
    u = url.strip().rstrip("/")
    u = u.removesuffix(".git")
    if "://" in u:
        u = u.split("://", 1)[1]
    elif ":" in u and "@" in u.split(":", 1)[0]:  # scp-like git@host:org/repo
        host, rest = u.split(":", 1)
        u = f"{host}/{rest}"
    if "@" in u.split("/", 1)[0]:
        u = u.split("@", 1)[1]
    host, _, rest = u.partition("/")
    return f"{host.lower()}/{rest}"


class GitGenerator:
    name = "git"
    takes_values = True

    def generate(
        self, spec: dict[str, Any], ctx: Context, *, nested: Nested | None = None
    ) -> list[Generated]:
        url = str(spec.get("repoURL") or "")
        if normalize_url(url) not in ctx.repo_urls:
            known = ", ".join(sorted(ctx.repo_urls)) or "none (no --repo-url and no git remote)"
            raise ctx.fail(
                f"git generator repoURL {url or '(empty)'} is not this repository ({known}); "
                "driftguard reads only the repository being diffed: pass --repo-url if it is this one"
            )
        prefix = str(spec.get("pathParamPrefix") or "")
        if spec.get("directories"):
            if spec.get("files"):
                raise ctx.fail("a git generator takes directories or files, not both")
            shape = _go_dir_params if ctx.go_template else _dir_params
            return [Generated(shape(p, prefix), (o,)) for p, o in self._dirs(spec, ctx)]
        if spec.get("files"):
            return self._files(spec, ctx, prefix)
        raise ctx.fail("a git generator needs directories or files")

    def _dirs(self, spec: dict[str, Any], ctx: Context) -> list[tuple[str, Origin]]:
        chosen, excluded = filter_directories(spec["directories"], all_directories(ctx.tree))
        for rel, pattern in excluded:
            origin = Origin("git", f"dir:{rel}", f"git directory {rel}", rel)
            ctx.dropped.append(Dropped((origin,), f"excluded by `{pattern}` (exclude: true)"))
        return [(rel, Origin("git", f"dir:{rel}", f"git directory {rel}", rel)) for rel in chosen]

    def _files(self, spec: dict[str, Any], ctx: Context, prefix: str) -> list[Generated]:
        items = [f for f in spec["files"] if isinstance(f, dict) and "path" in f]
        files = all_files(ctx.tree)
        chosen: dict[str, None] = {}
        for item in (i for i in items if not i.get("exclude")):
            chosen.update((f, None) for f in files if fnmatch.fnmatchcase(f, str(item["path"])))
        for item in (i for i in items if i.get("exclude")):
            for f in [f for f in chosen if fnmatch.fnmatchcase(f, str(item["path"]))]:
                del chosen[f]
                origin = Origin("git", f"file:{f}", f"git file {f}", f)
                ctx.dropped.append(Dropped((origin,), f"excluded by `{item['path']}` (exclude: true)"))
        out = []
        root = os.path.realpath(ctx.tree)
        for rel in sorted(chosen):
            if not inside(str(ctx.tree / rel), root):
                # the repo-server refuses a checkout holding such a symlink before any generator reads it
                # (argoproj/argo-cd reposerver/repository/repository.go, CheckOutOfBoundsSymlinks); the PR
                # check reads a plain git worktree, so it refuses the file itself, never reading the target
                raise ctx.fail(
                    f"git file {rel} is a symlink that leads outside the repository checkout; "
                    "replace it with the file itself"
                )
            try:
                sets = file_param_sets(rel, (ctx.tree / rel).read_text(), prefix, go=ctx.go_template)
            except (OSError, UnicodeDecodeError, DriftguardError, ValueError) as exc:
                raise ctx.fail(f"unable to process file '{rel}': {str(exc).splitlines()[0]}") from exc
            for i, params in enumerate(sets):
                key = f"file:{rel}" + (f"#{i}" if len(sets) > 1 else "")
                what = f"git file {rel}" + (f" (item {i})" if len(sets) > 1 else "")
                origin = Origin("git", key, what, rel)
                out.append(Generated(params, (origin,)))
        return out


def filter_directories(items: Any, paths: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """git.go ``filterApps``: (directories chosen, (directory, the exclude pattern that dropped it))."""
    entries = [d for d in items if isinstance(d, dict) and "path" in d] if isinstance(items, list) else []
    chosen, excluded = [], []
    for rel in paths:
        include = [
            str(d["path"]) for d in entries if not d.get("exclude") and path_match(str(d["path"]), rel)
        ]
        exclude = [str(d["path"]) for d in entries if d.get("exclude") and path_match(str(d["path"]), rel)]
        if include and exclude:
            excluded.append((rel, exclude[0]))
        elif include:
            chosen.append(rel)
    return chosen, excluded


def file_param_sets(rel: str, text: str, prefix: str, *, go: bool = False) -> list[Params]:
    """git.go ``generateParamsFromGitFile``: a map or a list of maps, plus the path parameters;
    fasttemplate flattens the keys (``a.b``) and formats values as strings, Go templates keep them."""
    data = safe_load(text)
    objects = data if isinstance(data, list) else [data if data is not None else {}]
    out = []
    for obj in objects:
        if not isinstance(obj, dict):
            raise ValueError("not a map or a list of maps")
        if go:
            params: Params = dict(obj)
            params.update(_go_path(_go_file_path(rel), prefix))
        else:
            params = {k: format_v(v) for k, v in flatten(obj).items()}
            params.update(_file_params(rel, prefix))
        out.append(params)
    return out


def dir_params(rel: str, prefix: str) -> Params:
    """git.go ``generateParamsFromApps``, fasttemplate: ``path``, ``path.basename``, ``path[N]`` ..."""
    return _dir_params(rel, prefix)


def go_dir_params(rel: str, prefix: str) -> Params:
    """The same in Go template mode: ``.path.path``, ``.path.basename``, ``.path.segments`` ..."""
    return _go_dir_params(rel, prefix)


def _dir_params(rel: str, prefix: str) -> Params:
    name = f"{prefix}.path" if prefix else "path"
    params: Params = {
        name: rel,
        f"{name}.basename": posixpath.basename(rel),
        f"{name}.basenameNormalized": sanitize_name(posixpath.basename(rel)),
    }
    params.update({f"{name}[{i}]": seg for i, seg in enumerate(rel.split("/")) if seg})
    return params


def _go_dir_params(rel: str, prefix: str) -> Params:
    base = posixpath.basename(rel)
    return _go_path(
        {
            "path": rel,
            "basename": base,
            "basenameNormalized": sanitize_name(base),
            "segments": rel.split("/"),
        },
        prefix,
    )


def _go_file_path(rel: str) -> Params:
    directory = posixpath.dirname(rel) or "."
    base, name = posixpath.basename(directory), posixpath.basename(rel)
    return {
        "path": directory,
        "basename": base,
        "filename": name,
        "basenameNormalized": sanitize_name(base),
        "filenameNormalized": sanitize_name(name),
        "segments": directory.split("/"),
    }


def _go_path(path: Params, prefix: str) -> Params:
    return {prefix: {"path": path}} if prefix else {"path": path}


def _file_params(rel: str, prefix: str) -> Params:
    name = f"{prefix}.path" if prefix else "path"
    directory = posixpath.dirname(rel) or "."
    base = posixpath.basename(directory)
    params: Params = {
        name: directory,
        f"{name}.basename": base,
        f"{name}.filename": posixpath.basename(rel),
        f"{name}.basenameNormalized": sanitize_name(base),
        f"{name}.filenameNormalized": sanitize_name(posixpath.basename(rel)),
    }
    params.update({f"{name}[{i}]": seg for i, seg in enumerate(directory.split("/")) if seg})
    return params


def all_directories(tree: Path) -> list[str]:
    """Every directory of the checkout, relative, sorted; ``.git`` skipped, symlinks not followed."""
    out = []
    for dirpath, dirnames, _ in os.walk(tree):
        dirnames[:] = sorted(d for d in dirnames if d != ".git" and not (Path(dirpath) / d).is_symlink())
        rel = os.path.relpath(dirpath, tree)
        if rel != ".":
            out.append(rel.replace(os.sep, "/"))
    return sorted(out)


def all_files(tree: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        rel = os.path.relpath(dirpath, tree)
        for name in filenames:
            if rel == "." and name == ".git":
                continue
            out.append(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/"))
    return sorted(out)

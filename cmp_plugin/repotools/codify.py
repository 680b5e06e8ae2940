"""``driftguard-cmp codify``: the edit to this environment's own inputs that reproduces a live change.

The on-call's hotfix (``kubectl patch`` of a GPU limit) is reverted by self-heal or erased by the
next sync unless it is in Git. codify renders the environment as Argo CD would (the same
pipeline as ``render``), looks for the smallest edit of the environment's own inputs that makes
the render hold each requested live value (cmp_plugin/repotools/codify_search.py), and proves it: the
candidate is applied to a copy of the checkout and rendered again, and the field-level diff of the
two renders (driftguard/diff.py) must be exactly the request. Only a proven edit is printed (a
unified diff) or, with ``--write``, written in place (layout kept: cmp_plugin/repotools/codify_edit.py).

Exit 0: proven; 1: no edit of this environment's inputs reproduces it (the reason is printed);
2: bad input (cli.py's EXIT_ERROR for every DriftguardError).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmp_plugin import pipeline
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.params import by_name
from cmp_plugin.repotools.codify_edit import edit_yaml
from cmp_plugin.repotools.codify_spec import (
    MISSING,
    Change,
    from_alert,
    get_at,
    parse_change,
    spec_of,
    tokens,
)
from cmp_plugin.repotools.codify_workspace import (
    Render,
    Target,
    Workspace,
    expected_objects,
    find_key,
    proof_lines,
    surplus,
)
from cmp_plugin.settings import CmpSettings
from driftguard.diff import diff_objects
from driftguard.errors import DriftguardError, InputError

__all__ = ["Outcome", "Target", "add_arguments", "codify", "run"]

EXIT_UNREPRODUCIBLE = 1


@dataclass
class Outcome:
    """What codify found: the edited files' new text, the proof, or why nothing reproduces it."""

    files: dict[Path, tuple[str, str]] = field(default_factory=dict)
    """repo-relative path -> (old text, new text); old is "" for a new file."""
    proof: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    how: list[str] = field(default_factory=list)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        type=Path,
        metavar="MANIFEST|PATH",
        help="an Application/ApplicationSet file of the repository, or the app directory (render's PATH)",
    )
    parser.add_argument("--app", default="", help="MANIFEST form: the generated Application to use")
    parser.add_argument(
        "--values-file", action="append", default=[], help="PATH form: a values file, relative to PATH"
    )
    parser.add_argument("--set-param", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--app-name", default="", help="PATH form: the Application's name")
    parser.add_argument("--namespace", default="", help="PATH form: the destination namespace")
    parser.add_argument(
        "--change",
        action="append",
        default=[],
        metavar="SPEC",
        help="KIND/NAMESPACE/NAME:POINTER=VALUE, the live value to reproduce (repeatable)",
    )
    parser.add_argument("--from-alert", type=Path, help="the notifier's alert JSON: codify its human changes")
    parser.add_argument(
        "--write", action="store_true", help="edit the files in place instead of printing a diff"
    )
    parser.add_argument(
        "--allow-chart",
        action="store_true",
        help="Helm: also edit the chart's own values.yaml (shared defaults)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The subcommand: resolve the environment, codify, print the diff (or write) and the proof."""
    changes = [parse_change(s) for s in args.change]
    if args.from_alert is not None:
        changes += from_alert(args.from_alert)
    if not changes:
        raise InputError("codify needs at least one --change SPEC or --from-alert FILE")
    asked: dict[tuple[str, str, str, str], Any] = {}
    for c in changes:
        where = (c.kind, c.namespace, c.name, c.pointer)
        if where in asked and asked[where] != c.value:
            raise InputError(f"{c.kind}/{c.namespace}/{c.name}:{c.pointer} is asked for two different values")
        asked[where] = c.value
    target = resolve(args)
    outcome = codify(target, changes, settings=CmpSettings.from_env())
    if outcome.refused:
        for line in outcome.refused:
            sys.stderr.write(f"driftguard: codify: {line}\n")
        return EXIT_UNREPRODUCIBLE
    for rel, (old, new) in outcome.files.items():
        if args.write:
            _write(target.repo_root / rel, new)
            print(f"driftguard: codify: wrote {rel}")
        else:
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(keepends=True),
                    new.splitlines(keepends=True),
                    fromfile=f"a/{rel}" if old else "/dev/null",
                    tofile=f"b/{rel}",
                )
            )
    for line in outcome.how + outcome.proof:
        sys.stderr.write(f"driftguard: codify: {line}\n")
    return 0


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.codify")
    tmp.write_text(text)
    tmp.replace(path)


# --- the environment -------------------------------------------------------------------------


def resolve(args: argparse.Namespace) -> Target:
    """The PATH form (render's flags) or the MANIFEST form (resolved as the PR check resolves it)."""
    if args.target.is_file():
        if args.values_file or args.set_param or args.app_name or args.namespace:
            raise InputError("--values-file/--set-param/--app-name/--namespace belong to the PATH form")
        return _from_manifest(args.target, args.app, allow_chart=args.allow_chart)
    if args.app:
        raise InputError("--app picks an Application of a MANIFEST; PATH is a directory")
    if not args.target.is_dir():
        raise InputError(f"{args.target}: neither an Application file nor an app directory")
    overrides: dict[str, Any] = {}
    for item in args.set_param:
        name, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--set-param: expected NAME=VALUE, got {item!r}")
        param = by_name(name.strip())
        overrides[param.name] = [v for v in value.split(",") if v] if param.collection == "array" else value
    if args.values_file:
        overrides["values-files"] = list(overrides.get("values-files", [])) + args.values_file
    params, explicit = parse_parameters({}, overrides)
    env = AppEnv(
        app_name=args.app_name or args.target.resolve().name,
        app_namespace=args.namespace,
        params=params,
        explicit=explicit,
    )
    root = pipeline.find_repo_root(args.target, "")
    return Target(args.target.resolve(), root, env, allow_chart=args.allow_chart)


def _from_manifest(manifest: Path, app: str, *, allow_chart: bool) -> Target:
    from cmp_plugin.prcheck import envdiff
    from cmp_plugin.prcheck.inventory import collect
    from cmp_plugin.prcheck.model import DiffOptions
    from cmp_plugin.prcheck.worktrees import remotes

    root = pipeline.find_repo_root(manifest.parent, "")
    rel = str(manifest.resolve().relative_to(root))
    settings = CmpSettings.from_env()
    from cmp_plugin.prcheck.appset.git import normalize_url

    urls = frozenset(normalize_url(u) for u in remotes(root))
    inv = collect([rel], root, urls, DiffOptions(), settings)
    if inv.errors:
        raise InputError("; ".join(inv.errors))
    envs = {k: v for k, v in inv.envs.items() if k != rel}
    if not envs:
        raise InputError(f"{manifest}: no Application with a source path (or ApplicationSet generating one)")
    if app:
        if app not in envs:
            raise InputError(f"--app {app}: {manifest} defines {', '.join(sorted(envs))}")
        chosen = envs[app]
    elif len(envs) == 1:
        chosen = next(iter(envs.values()))
    else:
        raise InputError(
            f"{manifest} defines {len(envs)} Applications; pick one with --app ({', '.join(sorted(envs))})"
        )
    app_dir = envdiff._confined(chosen, root)
    params, explicit = parse_parameters({}, dict(chosen.parameters))
    env = AppEnv(
        app_name=chosen.name,
        app_namespace=chosen.namespace,
        params=params,
        explicit=explicit,
        source_path=chosen.path,
    )
    return Target(app_dir.resolve(), root, env, allow_chart=allow_chart)


# --- the search ------------------------------------------------------------------------------


def codify(target: Target, changes: list[Change], *, settings: CmpSettings) -> Outcome:
    """Find and prove the edit for every change; Outcome.refused says why when there is none."""
    ws = Workspace(target, settings)
    try:
        before = ws.render()
        for c in changes:
            find_key(before, c)
        out = Outcome()
        chosen: dict[Path, str] = {}
        current = before
        for c in changes:
            found = _prove_one(ws, current, c, chosen)
            if isinstance(found, str):
                out.refused.append(
                    f"{spec_of(c)}: no edit of this environment's inputs reproduces it: {found}"
                )
                continue
            chosen, current, how = found
            ws.apply(chosen)  # the next change's candidates build on this one's edit
            out.how.append(how)
        if out.refused:
            return out
        rest = surplus(expected_objects(before, changes), current)
        if rest:
            out.refused.append(
                "each change is reproduced alone, but not all together: " + "; ".join(rest[:5])
            )
            return out
        out.proof = ["proven by rendering; the render changes in exactly:", *proof_lines(before, current)]
        for rel, text in chosen.items():
            out.files[rel] = (ws.originals.get(rel, ""), text)
        return out
    finally:
        ws.close()


def _prove_one(
    ws: Workspace, current: Render, change: Change, base: dict[Path, str]
) -> tuple[dict[Path, str], Render, str] | str:
    """The first candidate whose render is ``current`` plus exactly this change (or why none is)."""
    from cmp_plugin.repotools.codify_sources import Edit, candidates

    expected = expected_objects(current, [change])
    key = find_key(current, change)
    parts = tokens(change.pointer)
    reasons: list[str] = []
    for cand in candidates(ws, current, change):
        if not isinstance(cand, Edit):  # a reason the search gives up with
            reasons.append(cand)
            continue
        edits = dict(base)
        try:
            for rel, path, value, doc in cand.edits:
                text = edits[rel] if rel in edits else ws.text(rel)
                edits[rel] = (
                    value if path is None else edit_yaml(text, path, value, doc_index=doc, origin=str(rel))
                )
        except DriftguardError as exc:
            reasons.append(f"{cand.what}: {exc}")
            continue
        ws.apply(edits)
        try:
            after = ws.render()
        except DriftguardError as exc:
            reasons.append(f"{cand.what}: the render fails: {str(exc).splitlines()[0]}")
            continue
        finally:
            ws.apply(base)
        rest = surplus(expected, after)
        if not rest:
            return edits, after, cand.what
        hit = get_at(after.objects.get(key), parts)
        if hit is MISSING or diff_objects(get_at(expected[key], parts), hit):
            reasons.append(f"{cand.what}: the render does not change {change.pointer} so")
        else:
            reasons.append(f"{cand.what}: it would also change " + "; ".join(rest[:3]))
    return "; ".join(reasons) or "nothing in this environment's inputs writes that field"

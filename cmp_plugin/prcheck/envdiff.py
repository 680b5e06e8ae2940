"""``driftguard-cmp diff``: every environment rendered at two revisions, destructive changes first.

A target is an Argo CD Application or ApplicationSet manifest, a directory or glob of them, or a
bare app path. Each Application is one environment, named by the Application: base's definition
renders base, head's renders head (a PR that re-points ``source.path`` or changes its parameters
is diffed as written at each side). ApplicationSets are expanded at each revision into the
Applications the controller would make (cmp_plugin/prcheck/appset); an Application that disappears is
reported with why and what its deletion would prune. Both revisions are checked out as git
worktrees in a temporary directory, removed on exit, SIGINT, SIGTERM and SIGHUP; the user's
checkout is never touched.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmp_plugin import pipeline
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.prcheck.appset.findings import (
    KEEPING_POLICIES,
    Finding,
    disappearance_reason,
    effective_policy,
    shrink_findings,
    stray_findings,
)
from cmp_plugin.prcheck.appset.git import normalize_url
from cmp_plugin.prcheck.envcause import UNKNOWN, Probe, probe, removal_causes
from cmp_plugin.prcheck.fieldchanges import field_changes, generator_renames
from cmp_plugin.prcheck.inventory import collect
from cmp_plugin.prcheck.model import Change, DiffOptions, EnvDiff, Environment, Inventory, LiveCheck, Report
from cmp_plugin.prcheck.worktrees import git, relative, remotes, worktrees
from cmp_plugin.renderers.base import RenderJob
from cmp_plugin.settings import CmpSettings
from driftguard.errors import DriftguardError, InputError
from driftguard.manifests import ResourceKey, load_stream, resource_key
from driftguard.redact import Redactor

__all__ = ["Change", "DiffOptions", "EnvDiff", "Environment", "LiveCheck", "Report", "diff_revisions"]

PRUNING_FINALIZERS = (
    "resources-finalizer.argocd.argoproj.io",
    "resources-finalizer.argocd.argoproj.io/background",
    "resources-finalizer.argocd.argoproj.io/foreground",
)


def diff_revisions(
    targets: list[str],
    *,
    base: str,
    head: str,
    cwd: Path,
    settings: CmpSettings,
    options: DiffOptions,
    progress: Callable[[int, int, str], None] | None = None,
) -> Report:
    """Render every environment at ``base`` and ``head``; removals and deletions first.

    ``progress(done, total, name)`` is called before each Application is rendered."""
    deadline = time.monotonic() + options.timeout
    for name, rev in (("--base", base), ("--head", head)):
        if rev.startswith("-"):  # git would read it as an option; no revision starts so
            raise InputError(f"{name} {rev!r} is not a revision")
    root = Path(git(cwd, "rev-parse", "--show-toplevel"))
    base_sha = git(root, "rev-parse", "--verify", f"{base}^{{commit}}")
    head_sha = git(root, "rev-parse", "--verify", f"{head}^{{commit}}")
    rel_targets = [relative(t, cwd, root) for t in targets]
    urls = frozenset(normalize_url(u) for u in (*options.repo_urls, *remotes(root)))
    with worktrees(root, {"base": base_sha, "head": head_sha}) as trees:
        inv = {label: collect(rel_targets, tree, urls, options, settings) for label, tree in trees.items()}
        if time.monotonic() > deadline:
            raise InputError(
                f"the diff ran past --timeout {options.timeout:g}s while reading the Applications and ApplicationSets"
            )
        names = sorted(inv["base"].envs.keys() | inv["head"].envs.keys())
        if not names and not any(i.errors for i in inv.values()):
            raise InputError(f"no Application manifests or app directories found in {', '.join(targets)}")
        if len(names) > options.max_apps:
            raise InputError(
                f"{len(names)} Applications to render exceed --max-apps {options.max_apps}; "
                "narrow the targets or raise the limit"
            )
        diffs = []
        redactor = options.redactor or Redactor()
        live = options.live is not None
        pairs = [(name, inv["base"].envs.get(name), inv["head"].envs.get(name)) for name in names]
        with _Renders(workers(len(pairs))) as pool:
            # submitted in order, at most a few ahead of what is collected: each with the time left
            pending: dict[int, Any] = {}
            ahead = pool.size * 2

            def submit(j: int) -> None:
                left = deadline - time.monotonic()
                limited = settings._replace(timeout=max(0.001, min(settings.timeout, left)))
                _, b, h = pairs[j]
                pending[j] = pool.submit(b, h, trees, limited, redactor, live)

            for j in range(min(ahead, len(pairs))):
                submit(j)
            for i, name in enumerate(names):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise InputError(
                        f"the diff ran past --timeout {options.timeout:g}s after {i} of {len(names)} Applications"
                    )
                if progress is not None:
                    progress(i, len(names), name)
                d, objects = pending.pop(i).result()
                if i + ahead < len(pairs):
                    submit(i + ahead)
                if options.live is not None and not d.errors:
                    options.live.check(d, *objects)
                if d.base is not None and d.head is None:
                    _explain_deletion(d, inv, trees["head"], options)
                diffs.append(d)
        findings = _appset_findings(inv, settings, options)
    diffs.sort(key=lambda d: (not d.broken, not d.deletion, not d.removed, d.name))
    errors = {label: i.errors for label, i in inv.items() if i.errors}
    return Report(base_sha, head_sha, diffs, findings, errors, live=options.live is not None)


Rendered = tuple[dict[ResourceKey, dict[str, Any]], dict[ResourceKey, str], Probe | None]


def workers(jobs: int) -> int:
    """Renders run at once: the cores this process may use (os.process_cpu_count, Python 3.13+,
    else the affinity mask), never more than there are jobs."""
    count = getattr(os, "process_cpu_count", None)
    cores = count() if count is not None else len(os.sched_getaffinity(0))
    return max(1, min(cores or 1, jobs))


class _Renders:
    """``_diff_env`` in forked worker processes (the sandbox's per-spawn state and the render
    deadline's SIGALRM are per process), or in this one when one worker is all there is."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.executor: Any = None

    def __enter__(self) -> _Renders:
        if self.size > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self.executor = ProcessPoolExecutor(self.size, mp_context=multiprocessing.get_context("fork"))
        return self

    def submit(self, *args: Any) -> Any:
        if self.executor is not None:
            return self.executor.submit(_diff_env_job, *args)
        from concurrent.futures import Future

        done: Future[Any] = Future()
        try:
            done.set_result(_diff_env_job(*args))
        except BaseException as exc:
            done.set_exception(exc)
        return done

    def __exit__(self, kind: object, *exc: object) -> None:
        if self.executor is None:
            return
        if kind is not None:  # a signal or an error: the renders still running are stopped, tools too
            from cmp_plugin.spawn import kill_tree

            for pid in list(getattr(self.executor, "_processes", None) or {}):
                kill_tree(pid)
        self.executor.shutdown(wait=kind is None, cancel_futures=True)


def _diff_env_job(
    base: Environment | None,
    head: Environment | None,
    trees: dict[str, Path],
    settings: CmpSettings,
    redactor: Redactor,
    live: bool,
) -> tuple[EnvDiff, tuple[Objects, Objects]]:
    return _diff_env(base, head, trees, settings, redactor, live=live)


def _app_env(env: Environment) -> AppEnv:
    params, explicit = parse_parameters({}, dict(env.parameters))
    app_name = (
        env.name if env.name != env.path else Path(env.path).name
    )  # a bare path: release named like its directory
    return AppEnv(
        app_name=app_name, app_namespace=env.namespace, params=params, explicit=explicit, source_path=env.path
    )


def same_inputs(base: Environment, head: Environment, trees: dict[str, Path], settings: CmpSettings) -> bool:
    """Whether base and head render from identical inputs: the same render fingerprint
    (cmp_plugin/fingerprint.py), so the same manifests; False when either is not cacheable."""
    from cmp_plugin import fingerprint, policy
    from cmp_plugin.renderers import choose

    digests = set()
    try:
        for label, env in (("base", base), ("head", head)):
            app_dir = _confined(env, trees[label])
            app_env = policy.apply(_app_env(env), settings)
            renderer = choose(app_dir, app_env.param("renderer"))
            found = fingerprint.compute(app_dir, trees[label], app_env, settings, renderer.name, os.environ)
            if found.digest is None:
                return False
            digests.add(found.digest)
    except (DriftguardError, OSError):
        return False  # the render reports it
    return len(digests) == 1


def _render(env: Environment, tree: Path, settings: CmpSettings) -> Rendered:
    """Objects by key, their template source, and (helm) what the proof of a removal's cause needs."""
    app_dir = _confined(env, tree)
    app_env = _app_env(env)
    outcome = pipeline.run(app_dir, repo_root=tree, env=app_env, settings=settings, guards=())
    objects: dict[ResourceKey, dict[str, Any]] = {}
    sources: dict[ResourceKey, str] = {}
    for doc in load_stream(outcome.text, source=env.path):
        key = resource_key(doc.obj, default_namespace=app_env.namespace)
        objects[key] = doc.obj
    for key, scanned in zip(outcome.keys, outcome.docs, strict=True):
        sources[key] = scanned.source
    found: Probe | None = None
    if outcome.renderer == "helm":
        found = probe(
            RenderJob(app_dir, tree, app_env, settings, settings.scratch_root), outcome.text, outcome.docs
        )
    return objects, sources, found


def _confined(env: Environment, tree: Path) -> Path:
    """The app directory, refused when ``source.path`` (or a symlink on its way) leaves the repository."""
    root = tree.resolve()
    if Path(env.path).is_absolute() or not (tree / env.path).resolve().is_relative_to(root):
        raise InputError(f"source.path {env.path!r} of {env.name} leads outside the repository")
    app_dir = tree / env.path
    if not app_dir.is_dir():
        raise InputError(f"source.path {env.path!r} of {env.name} does not exist at this revision")
    return app_dir


Objects = dict[ResourceKey, dict[str, Any]]


def _diff_env(
    base: Environment | None,
    head: Environment | None,
    trees: dict[str, Path],
    settings: CmpSettings,
    redactor: Redactor,
    *,
    live: bool = False,
) -> tuple[EnvDiff, tuple[Objects, Objects]]:
    """One environment's diff, and the objects rendered at base and head (for ``--live``).

    Identical inputs at both revisions are not rendered: reported unchanged (``--live`` renders
    them once, to compare with the cluster).
    """
    out = EnvDiff(base, head)
    empty: Rendered = ({}, {}, None)
    rendered: dict[str, Rendered] = {}
    if base is not None and head is not None and same_inputs(base, head, trees, settings):
        out.definition = _definition_changes(base, head)
        out.unchanged = True
        if not live:
            return out, ({}, {})
        try:
            objects = _render(head, trees["head"], settings)[0]
        except DriftguardError:
            pass  # rendered again below, where the error is reported
        else:
            return out, (objects, objects)
    for label, env in (("base", base), ("head", head)):
        if env is None:
            rendered[label] = empty
            continue
        try:
            rendered[label] = _render(env, trees[label], settings)
        except DriftguardError as exc:
            detail = (getattr(exc, "stderr", "") or "").strip()
            msg = str(exc).splitlines()[0] + (f": {detail.splitlines()[-1]}" if detail else "")
            # the checkout's temporary path is not part of the error: the same error at base and at
            # head must read the same (an error already there at base does not fail the check)
            tree = str(trees[label])
            out.errors[label] = msg.replace(tree + "/", "").replace(tree, ".")
            rendered[label] = empty
    if base is not None and head is not None:
        out.definition = _definition_changes(base, head)
    (b_obj, _, b_probe), (h_obj, _, h_probe) = rendered["base"], rendered["head"]
    if out.errors:
        # a side that did not render has no resources to compare: nothing is counted as removed or
        # added against it (the report says the render failed instead)
        return out, (b_obj, h_obj)
    going = sorted(b_obj.keys() - h_obj.keys())
    coming = sorted(h_obj.keys() - b_obj.keys())
    renames = generator_renames(going, coming) if head is not None else []
    for old, new in renames:
        fields, more = field_changes(b_obj[old], h_obj[new], new, redactor, renamed=True)
        out.renamed.append(Change(new, fields=fields, more_fields=more, renamed_from=old))
    going = [k for k in going if k not in {o for o, _ in renames}]
    coming = [k for k in coming if k not in {n for _, n in renames}]
    why: dict[ResourceKey, str] = {}
    if head is not None and going and b_probe is not None and h_probe is not None:
        try:
            why = removal_causes(b_probe, h_probe, going)
        except DriftguardError:
            why = {}  # the proof could not run: the causes stay unknown
    for key in going:
        out.removed.append(Change(key, why.get(key, "")))
    out.added = [Change(k) for k in coming]
    for k in sorted(b_obj.keys() & h_obj.keys()):
        if b_obj[k] != h_obj[k]:
            fields, more = field_changes(b_obj[k], h_obj[k], k, redactor)
            out.changed.append(Change(k, fields=fields, more_fields=more))
    if head is not None and out.definition:
        for c in out.removed:
            c.cause = c.cause or f"the Application's definition changed: {'; '.join(out.definition)}"
    if head is not None:
        for c in out.removed:
            c.cause = c.cause or UNKNOWN
    return out, (b_obj, h_obj)


def _definition_changes(base: Environment, head: Environment) -> list[str]:
    out = []
    if base.path != head.path:
        out.append(f"source.path {base.path} -> {head.path}")
    if base.namespace != head.namespace:
        out.append(f"destination.namespace {base.namespace or '(none)'} -> {head.namespace or '(none)'}")
    b, h = dict(base.parameters), dict(head.parameters)
    for name in sorted(b.keys() | h.keys()):
        if b.get(name) != h.get(name):
            out.append(f"parameter {name} {_j(b.get(name))} -> {_j(h.get(name))}")
    return out


def _j(value: Any) -> str:
    return "unset" if value is None else json.dumps(value)


def _explain_deletion(d: EnvDiff, inv: dict[str, Inventory], head_tree: Path, options: DiffOptions) -> None:
    """Why an Application disappears at head, and whether its resources are pruned or stay."""
    base = d.base
    assert base is not None
    keep = ""
    if base.appset:
        appset = inv["base"].appsets[base.appset]
        reason = disappearance_reason(
            inv["base"].generated[base.name], inv["head"].appsets.get(base.appset), head_tree
        )
        d.deletion = f"ApplicationSet {base.appset} stops generating it: {reason}"
        policy = effective_policy(appset, options.policy)
        if policy in KEEPING_POLICIES:
            keep = f"the ApplicationSet policy is {policy}: the controller never deletes Applications"
    else:
        d.deletion = "the Application manifest is gone at head"
    if not keep and not any(f in PRUNING_FINALIZERS for f in base.finalizers):
        keep = (
            "the ApplicationSet sets syncPolicy.preserveResourcesOnDeletion: true"
            if base.appset and inv["base"].appsets[base.appset].preserve
            else "the Application has no resources-finalizer: deleting it leaves its resources in place"
        )
    if keep:
        d.kept = [Change(c.key, keep) for c in d.removed]
        d.removed = []
    else:
        for c in d.removed:
            c.cause = f"pruned with the Application: {d.deletion}"


def _appset_findings(inv: dict[str, Inventory], settings: CmpSettings, options: DiffOptions) -> list[Finding]:
    out: list[Finding] = []
    patterns = tuple(settings.stray_patterns) + options.stray_patterns
    for name in sorted(inv["base"].appsets.keys() | inv["head"].appsets.keys()):
        base, head = inv["base"].appsets.get(name), inv["head"].appsets.get(name)
        head_failed = head is None and any(e for e in inv["head"].errors if f"ApplicationSet {name}:" in e)
        if not head_failed:
            out += shrink_findings(
                name,
                base,
                head,
                max_shrink=options.max_appset_shrink,
                allowed=list(options.allow_appset_shrink),
            )
        if head is not None:
            out += stray_findings(name, base, head, patterns)
    return out

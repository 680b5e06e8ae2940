"""``driftguard-cmp diff``: every environment rendered at two revisions, destructive changes first.

A target is an Argo CD Application or ApplicationSet manifest, a directory or glob of them, or a
bare app path. Each Application is one environment, named by the Application: base's definition
renders base, head's renders head (a PR that re-points ``source.path`` or changes its parameters
is diffed as written at each side). ApplicationSets are expanded at each revision into the
Applications the controller would make (cmp_plugin/appset); an Application that disappears is
reported with why and what its deletion would prune. Both revisions are checked out as git
worktrees in a temporary directory, removed on exit, SIGINT, SIGTERM and SIGHUP; the user's
checkout is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cmp_plugin import pipeline
from cmp_plugin.appset import Cluster, Context
from cmp_plugin.appset.expand import Expansion, GeneratedApp, expand, is_appset
from cmp_plugin.appset.findings import (
    KEEPING_POLICIES,
    Finding,
    disappearance_reason,
    effective_policy,
    shrink_findings,
    stray_findings,
)
from cmp_plugin.appset.git import normalize_url
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.confine import inside
from cmp_plugin.envcause import UNKNOWN, Probe, probe, removal_causes
from cmp_plugin.fieldchanges import FieldLine, field_changes, generator_renames
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


@dataclass(frozen=True)
class DiffOptions:
    """The diff's limits and ApplicationSet inputs (flags of ``driftguard-cmp diff``)."""

    repo_urls: tuple[str, ...] = ()
    clusters: tuple[Cluster, ...] | None = None
    policy: str = ""
    """The ApplicationSet controller's ``--policy``; empty: each ApplicationSet's own applicationsSync."""
    max_appset_shrink: float = 0.2
    allow_appset_shrink: tuple[str, ...] = ()
    max_apps: int = 1000
    timeout: float = 1800.0
    stray_patterns: tuple[str, ...] = ()
    """Beyond the sidecar's (DRIFTGUARD_CMP_STRAY_PATTERNS or the defaults)."""
    live: LiveCheck | None = None
    """``--live``: compares each environment with what runs in the cluster (cmp_plugin/envlive.py)."""
    redactor: Redactor | None = None
    """Masks Secret values in field changes (``--live`` shares it); default: one with a key of this run."""


@dataclass(frozen=True)
class Environment:
    """One thing Argo CD renders: an Application (or a bare path) with its plugin parameters."""

    name: str
    path: str
    """Source path, relative to the repository root, as written."""
    namespace: str = ""
    parameters: tuple[tuple[str, Any], ...] = ()
    finalizers: tuple[str, ...] = ()
    appset: str = ""
    """The ApplicationSet that generates it; empty when written by hand."""
    origin: str = ""
    """What the generator made it from (``git directory clusters/...``)."""
    app_namespace: str = ""
    """The Application's own namespace (Argo CD's ``appNamespace``); empty: Argo CD's."""
    compare: str = ""
    """The Application's ``ignoreDifferences`` and ``syncPolicy.syncOptions`` as JSON (for ``--live``)."""


@dataclass
class Change:
    key: ResourceKey
    cause: str = ""
    fields: list[FieldLine] = field(default_factory=list)
    """What changes in the resource, field by field (changed and renamed resources)."""
    more_fields: int = 0
    """Field changes past the ones kept in ``fields``."""
    renamed_from: ResourceKey | None = None
    """A generated ConfigMap/Secret: the name it had at base (its hash suffix changed)."""


class LiveCheck(Protocol):
    """What ``--live`` does with one environment once both revisions are rendered."""

    def check(
        self, d: EnvDiff, base: dict[ResourceKey, dict[str, Any]], head: dict[ResourceKey, dict[str, Any]]
    ) -> None: ...


@dataclass
class EnvDiff:
    base: Environment | None
    head: Environment | None
    removed: list[Change] = field(default_factory=list)
    added: list[Change] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    renamed: list[Change] = field(default_factory=list)
    """Generated ConfigMaps/Secrets whose hash suffix changed: one change of their keys, not a removal."""
    kept: list[Change] = field(default_factory=list)
    """Resources of a deleted Application that stay in the cluster (no pruning finalizer, policy)."""
    definition: list[str] = field(default_factory=list)
    """How the Application itself changed (source path, parameters, namespace)."""
    deletion: str = ""
    """Why the Application disappears at head, when it does."""
    errors: dict[str, str] = field(default_factory=dict)
    """revision label (base/head) -> why it could not be rendered."""
    live: Any = None
    """With ``--live``: what merging does to the cluster as it is now (cmp_plugin/envlive.py LiveDiff)."""
    unchanged: bool = False
    """Its render inputs are identical at both revisions (the same fingerprint): not rendered."""

    @property
    def env(self) -> Environment:
        env = self.head or self.base
        assert env is not None
        return env

    @property
    def name(self) -> str:
        return self.env.name

    @property
    def broken(self) -> bool:
        """Cannot be rendered at head, and this PR broke it (the same error at base was there before)."""
        return "head" in self.errors and self.errors.get("base") != self.errors["head"]


@dataclass
class Report:
    base_sha: str
    head_sha: str
    diffs: list[EnvDiff]
    findings: list[Finding] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)
    """base/head -> ApplicationSets that could not be expanded, and why."""
    live: bool = False
    """``--live`` was used: each environment's ``live`` says what it found."""


@dataclass
class Inventory:
    envs: dict[str, Environment] = field(default_factory=dict)
    appsets: dict[str, Expansion] = field(default_factory=dict)
    generated: dict[str, GeneratedApp] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    defined_at: dict[str, str] = field(default_factory=dict)
    """Where each hand-written Application is defined (``file:line``), to refuse a second definition."""


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise InputError(f"git {' '.join(args)} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout.strip()


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
    rel_targets = [_relative(t, cwd, root) for t in targets]
    urls = frozenset(normalize_url(u) for u in (*options.repo_urls, *_remotes(root)))
    with _worktrees(root, {"base": base_sha, "head": head_sha}) as trees:
        inv = {label: _inventory(rel_targets, tree, urls, options, settings) for label, tree in trees.items()}
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


@contextlib.contextmanager
def _worktrees(root: Path, shas: dict[str, str]) -> Iterator[dict[str, Path]]:
    """Detached worktrees of each revision, removed however the diff ends (signals included)."""
    trees: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="driftguard-diff-") as tmp, _signals_exit():
        try:
            for label, sha in shas.items():
                trees[label] = Path(tmp) / label
                git(root, "worktree", "add", "--detach", "--quiet", str(trees[label]), sha)
            yield trees
        finally:
            with _signals_deferred():
                for tree in trees.values():
                    subprocess.run(
                        ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                        capture_output=True,
                        check=False,
                    )
                    shutil.rmtree(tree, ignore_errors=True)
                subprocess.run(
                    ["git", "-C", str(root), "worktree", "prune"], capture_output=True, check=False
                )


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _signals_exit() -> Iterator[None]:
    """SIGINT/SIGTERM/SIGHUP raise SystemExit(128+n) so every ``finally`` (worktree removal) runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    old = {s: signal.signal(s, leave) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """While cleaning up, a second signal must not cut the cleanup short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _remotes(root: Path) -> list[str]:
    try:
        out = git(root, "remote", "-v")
    except InputError:
        return []
    return sorted({line.split()[1] for line in out.splitlines() if len(line.split()) >= 2})


def _relative(target: str, cwd: Path, root: Path) -> str:
    """A target (path or glob, relative to where the user stands) relative to the repository root."""
    where = Path(os.path.normpath(cwd.resolve() / target))
    if not where.is_relative_to(root.resolve()):
        raise InputError(f"target {target} is outside the repository {root}")
    return str(where.relative_to(root.resolve()))


def _inventory(
    targets: list[str], tree: Path, urls: frozenset[str], options: DiffOptions, settings: CmpSettings
) -> Inventory:
    inv = Inventory()
    for target in targets:
        matches = sorted(tree.glob(target)) if any(ch in target for ch in "*?[") else [tree / target]
        for path in matches:
            if path.is_file():
                _read_manifests(path, tree, inv, urls, options, settings)
            elif path.is_dir():
                before = len(inv.envs) + len(inv.appsets)
                for f in sorted(path.glob("*.yaml")) + sorted(path.glob("*.yml")):
                    _read_manifests(f, tree, inv, urls, options, settings)
                if len(inv.envs) + len(inv.appsets) == before:
                    rel = str(path.relative_to(tree))
                    inv.envs[rel] = Environment(rel, rel)
    return inv


def _read_manifests(
    path: Path, tree: Path, inv: Inventory, urls: frozenset[str], options: DiffOptions, settings: CmpSettings
) -> None:
    source = str(path.relative_to(tree))
    if not inside(str(path), os.path.realpath(tree)):
        # what the repo-server refuses before any render (reposerver/repository/repository.go,
        # CheckOutOfBoundsSymlinks): the PR's worktree may hold a symlink to a file of the CI runner
        inv.errors.append(f"{source}: a symlink that leads outside the repository checkout; not read")
        return
    try:
        docs = load_stream(path.read_bytes(), source=source)
    except DriftguardError:
        return
    for doc in docs:
        obj = doc.obj
        if is_appset(obj):
            name = str((obj.get("metadata") or {}).get("name") or source)
            ctx = Context(
                appset=name,
                tree=tree,
                repo_urls=urls,
                clusters=list(options.clusters) if options.clusters is not None else None,
                helm=_helm(settings),
                timeout=settings.timeout,
            )
            try:
                expansion = expand(obj, ctx, source=source)
            except DriftguardError as exc:
                inv.errors.append(f"{source}: {str(exc).splitlines()[0]}")
                continue
            inv.appsets[name] = expansion
            for app in expansion.apps:
                env = _environment_of(app.app, app.name, appset=name, origin=app.origins[-1].what)
                if env is None:
                    continue
                if app.name in inv.envs:
                    other = inv.envs[app.name].appset or "a hand-written manifest"
                    inv.errors.append(
                        f"{source}: ApplicationSet {name} generates Application {app.name}, which {other} also defines"
                    )
                    continue
                inv.envs[app.name] = env
                inv.generated[app.name] = app
        elif obj.get("kind") == "Application" and str(obj.get("apiVersion", "")).startswith("argoproj.io/"):
            env = _environment_of(obj, path.stem)
            if env is not None and env.name in inv.envs and inv.envs[env.name].appset:
                inv.errors.append(
                    f"{source}: Application {env.name} is also generated by ApplicationSet {inv.envs[env.name].appset}"
                )
            elif env is not None and inv.defined_at.get(env.name, doc.where) != doc.where:
                # Argo CD keeps one of two same-named resources (gitops-engine's dedup, a
                # RepeatedResourceWarning); the PR check would compare whichever it read last, so a
                # decoy could hide what the other one deletes: refuse, naming both
                inv.errors.append(
                    f"{doc.where}: Application {env.name} is also defined at {inv.defined_at[env.name]}; "
                    "an Application name must be defined once"
                )
            elif env is not None:
                inv.envs[env.name] = env
                inv.defined_at[env.name] = doc.where


def _helm(settings: CmpSettings) -> str:
    try:
        return settings.helm_path()
    except DriftguardError:
        return ""


def _environment_of(
    app: dict[str, Any], default: str, *, appset: str = "", origin: str = ""
) -> Environment | None:
    spec = app.get("spec") or {}
    source = spec.get("source") or {}
    if not isinstance(source, dict) or "path" not in source:
        return None
    plugin = source.get("plugin") or {}
    params = []
    for p in plugin.get("parameters") or [] if isinstance(plugin, dict) else []:
        if isinstance(p, dict) and "name" in p:
            value = p.get("array", p.get("map", p.get("string", "")))
            params.append((str(p["name"]), value))
    meta = app.get("metadata") or {}
    policy = spec.get("syncPolicy")
    policy = policy if isinstance(policy, dict) else {}
    compare = {"ignoreDifferences": spec.get("ignoreDifferences"), "syncOptions": policy.get("syncOptions")}
    return Environment(
        name=str(meta.get("name") or default),
        path=str(source["path"]).strip("/") or ".",
        namespace=str((spec.get("destination") or {}).get("namespace") or ""),
        parameters=tuple(params),
        finalizers=tuple(str(f) for f in meta.get("finalizers") or []),
        appset=appset,
        origin=origin,
        app_namespace=str(meta.get("namespace") or ""),
        compare=json.dumps(compare, sort_keys=True, default=str),
    )


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
            from cmp_plugin.launch import kill_tree

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

"""The render pipeline shared by ``generate`` (Argo CD) and ``render`` (people, PR checks).

source guards -> renderer (by marker files) -> size cap -> identities -> render guards.
Any refusal raises GuardRefusal; the caller turns it into a non-zero exit.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from cmp_plugin import confine, paths, policy
from cmp_plugin.argo_env import AppEnv
from cmp_plugin.renderers import RenderJob, choose
from cmp_plugin.settings import CmpSettings
from driftguard.errors import InputError, LimitExceeded

if TYPE_CHECKING:
    from cmp_plugin.guards import Guard, GuardContext
    from cmp_plugin.launch import Early
    from cmp_plugin.scan import Doc
    from driftguard.manifests import ResourceKey

__all__ = ["Outcome", "find_repo_root", "run"]


class Outcome(NamedTuple):
    """A render that passed every guard."""

    text: str
    renderer: str
    docs: list[Doc]
    keys: list[ResourceKey]
    warnings: list[str]
    notes: dict[str, object]
    kept: list[ResourceKey]
    """What Argo CD keeps of the render (cmp_plugin/target.py): the baseline of the next render."""


def run(
    app_dir: Path,
    *,
    repo_root: Path,
    env: AppEnv,
    settings: CmpSettings,
    guards: tuple[Guard, ...] | None = None,
    early: Early | None = None,
    hot: bool = False,
    cache: bool = False,
) -> Outcome:
    """Render ``app_dir`` and run every guard; GuardRefusal, RenderError or InputError on failure.

    With ``cache`` (``generate``), a render whose fingerprint was rendered before is served from
    the render cache (cmp_plugin/render_cache.py), the shrink guard checked again, and a render
    that passes is kept there.

    The renderer starts first; the guards and the scanner are imported and the source guards run
    while it works, so Python's own start-up cost overlaps the tool's. Everything imported before
    that start (this module, the renderers, argo_env, params, settings, process) stays free of
    ``dataclasses`` and other heavy imports: ``bench/cmp_overhead.py`` measures the difference.
    """
    with deadline(settings.timeout):
        return _run(
            app_dir,
            repo_root=repo_root,
            env=env,
            settings=settings,
            guards=guards,
            early=early,
            hot=hot,
            cache=cache and guards is None,
        )


GRACE = 0.5
"""Seconds the in-process deadline waits past DRIFTGUARD_CMP_TIMEOUT (still far under Argo CD's 60 s)."""


class deadline:
    """The whole render, in-process work included, under DRIFTGUARD_CMP_TIMEOUT (SIGALRM, main thread).

    The tools have their own deadline (process.ToolRun); this one bounds what runs in Python: the
    file walks, the scanner, the gating analysis, YAML parsing. CPython's regular-expression engine
    and the YAML constructors check for signals as they go, so the alarm stops them mid-work.
    Off the main thread (signals cannot be used there) it does nothing.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.previous: object = None
        self.armed = False

    def __enter__(self) -> None:
        import signal
        import threading
        import time

        if threading.current_thread() is not threading.main_thread() or self.seconds <= 0:
            return
        from cmp_plugin import process

        self.previous = signal.signal(signal.SIGALRM, self._expired)
        # every tool of the render stops by this deadline (process.RENDER_DEADLINE), and the alarm
        # comes a moment after it, so that a slow tool is reported by name (ToolRun)
        process.RENDER_DEADLINE[:] = [(threading.get_ident(), time.monotonic() + self.seconds)]
        signal.setitimer(signal.ITIMER_REAL, self.seconds + GRACE)
        self.armed = True

    def _expired(self, signum: int, frame: object) -> None:
        from driftguard.errors import RenderTimeout

        raise RenderTimeout(
            f"the render did not finish in {self.seconds:g} s (DRIFTGUARD_CMP_TIMEOUT) and was stopped"
        )

    def __exit__(self, *exc: object) -> None:
        if self.armed:
            import signal

            from cmp_plugin import process

            signal.setitimer(signal.ITIMER_REAL, 0)
            process.RENDER_DEADLINE.clear()
            signal.signal(signal.SIGALRM, self.previous)  # type: ignore[arg-type]
            self.armed = False


def _run(
    app_dir: Path,
    *,
    repo_root: Path,
    env: AppEnv,
    settings: CmpSettings,
    guards: tuple[Guard, ...] | None,
    early: Early | None,
    hot: bool = False,
    cache: bool = False,
) -> Outcome:
    env = policy.apply(env, settings)  # the platform's defaults; a tenant loosening past them is refused
    app_dir = app_dir.resolve()
    if not app_dir.is_dir():
        raise InputError(f"app directory {app_dir} does not exist")
    scratch: Path | None = None
    if early is not None:  # the planned tool's scratch becomes this render's (cmp_plugin/launch.py)
        early.scratch_taken = True
        scratch = Path(early.scratch)
    ctx: GuardContext | None = None
    try:
        # a cache hit needs no scratch: the directory is made once the render is known to run
        job = RenderJob(
            app_dir, repo_root.resolve(), env, settings, scratch or Path(settings.scratch_root), early
        )
        renderer = choose(app_dir, env.param("renderer"))
        _refuse_options_for_other_tools(env, renderer.name)
        # before the tool runs: every file it will read resolves inside the checkout (the
        # fingerprint's walk is that check, and more)
        digest = None
        if cache:
            from cmp_plugin import render_cache

            cache = render_cache.usable(settings, job.repo_root)
        if cache:
            import os

            digest = render_cache.digest_for(app_dir, job.repo_root, env, settings, renderer.name, os.environ)
            hit = render_cache.load(settings, digest) if digest is not None else None
            served = _serve(hit, job, renderer.name) if hit is not None else None
            if served is not None:
                return served
        else:
            confine.check_render_inputs(app_dir, job.repo_root, renderer.name)
        if scratch is None:
            scratch = Path(paths.new_scratch(str(settings.scratch_root)))
            job = job._replace(scratch=scratch)
        # and this render holds one of the slots that keep renders x cap under the container's limit
        import os
        import time

        from cmp_plugin import memory

        memory.hold_slot(
            os.environ, str(settings.cache_dir), deadline=time.monotonic() + settings.timeout / 2
        )
        from cmp_plugin import sandbox

        sandbox.configure(checkout=str(job.repo_root), scratch=str(scratch))  # what its tools may reach
        pending = renderer.start(job)
        try:
            import shutil  # for the clean-up below: imported while the tool works, not after

            from cmp_plugin.guards import RENDER, SOURCE, GuardContext
            from cmp_plugin.guards.registry import GUARDS
            from cmp_plugin.scan import scan_stream
            from cmp_plugin.target import target
            from driftguard.manifests import Limits

            active = GUARDS if guards is None else guards
            ctx = GuardContext(job, renderer=renderer.name, hot=hot)
            for guard in active:
                guard.begin(ctx)
            warnings: list[str] = []
            for guard in active:
                if guard.stage == SOURCE:
                    warnings += guard.check(ctx)
            rendered = pending.wait()
        except BaseException:
            pending.cancel()
            raise
        if len(rendered.text) > settings.max_output_bytes:
            raise LimitExceeded(
                f"the render is {len(rendered.text)} bytes, over {settings.max_output_bytes}",
                source=renderer.name,
            )
        limits = Limits(max_bytes=settings.max_output_bytes)
        docs = (
            rendered.docs
            if rendered.docs is not None
            else scan_stream(rendered.text, source=renderer.name, limits=limits)
        )
        warnings += rendered.warnings
        ctx.rendered = rendered
        ctx.docs = docs
        kept = target(docs, destination_namespace=env.destination_namespace)
        ctx.keys, ctx.kept, ctx.left_out = kept.keys, kept.kept, kept.left_out
        before_shrink: list[str] | None = None
        for guard in active:
            if guard.stage == RENDER:
                if guard.name == "shrink":
                    before_shrink = list(warnings)
                warnings += guard.check(ctx)
        if digest is not None and before_shrink is not None and _complete(ctx):
            render_cache.store(
                settings,
                digest,
                text=rendered.text,
                renderer=renderer.name,
                warnings=before_shrink,
                keys=ctx.keys,
                kept=ctx.kept,
            )
        return Outcome(rendered.text, renderer.name, docs, ctx.keys, warnings, ctx.notes, ctx.kept)
    finally:
        import shutil

        for cleanup in ctx.cleanups if ctx is not None else ():
            cleanup()  # what a guard started in begin() (implicit-defaults' proof renders)

        from cmp_plugin import sandbox

        sandbox.clear()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _complete(ctx: GuardContext) -> bool:
    """Whether the guards said all they will say of this input (no implicit-defaults proof pending)."""
    from cmp_plugin.guards.implicit_defaults import NOTE
    from cmp_plugin.helmchart.implicit import PENDING

    switches = ctx.notes.get(NOTE)
    return not isinstance(switches, list) or all(f.verdict != PENDING for f in switches)


def _serve(hit: object, job: RenderJob, renderer: str) -> Outcome | None:
    """A cached render with the shrink guard checked again (its baseline is outside the inputs);
    None when shrink would refuse: the full render then says which key is behind each removal."""
    from cmp_plugin.guards import GuardContext
    from cmp_plugin.guards.shrink import ShrinkGuard
    from cmp_plugin.render_cache import Hit
    from driftguard.errors import GuardRefusal

    assert isinstance(hit, Hit)
    ctx = GuardContext(job, renderer=renderer, hot=True)
    ctx.kept = hit.kept
    try:
        shrink = ShrinkGuard().check(ctx)
    except GuardRefusal:
        return None
    return Outcome(
        hit.text, hit.renderer, [], hit.keys, hit.warnings + shrink, {"render-cache": "hit"}, hit.kept
    )


def _refuse_options_for_other_tools(env: AppEnv, renderer: str) -> None:
    """An option the Application set for another tool (helm's on a kustomize app) is an error, not ignored."""
    from cmp_plugin.params import by_name, not_applying

    wrong = not_applying(env.explicit, renderer)
    if wrong:
        owners = " and ".join(sorted({tool for name in wrong for tool in by_name(name).tools}))
        many = len(wrong) > 1
        raise InputError(
            f"parameter{'s' if many else ''} {', '.join(wrong)} {'do' if many else 'does'} not apply to this "
            f"app: it renders with {renderer}, and {'they are' if many else 'that is a'} {owners} "
            f"option{'s' if many else ''}; remove {'them' if many else 'it'} from the Application's plugin "
            "parameters (or plugin env), or set the renderer parameter"
        )


def find_repo_root(app_dir: Path, source_path: str) -> Path:
    """The checkout's root: ``app_dir`` minus ``ARGOCD_APP_SOURCE_PATH``, else the nearest parent with .git.

    Searched along the path as given, before symlinks are resolved: an app directory that is a
    symlink out of its repository must not make the place it points at the "repository".
    """
    import os

    logical = os.path.normpath(app_dir if app_dir.is_absolute() else Path.cwd() / app_dir)
    return Path(paths.repo_root(logical, source_path)).resolve()

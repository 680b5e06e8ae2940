"""What every renderer shares: the job it gets, what it returns, and path confinement.

Imported before the renderer starts, so no ``dataclasses`` here (see ``cmp_plugin/params.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from cmp_plugin import launch
from cmp_plugin.argo_env import AppEnv
from cmp_plugin.process import ToolRun
from cmp_plugin.settings import CmpSettings
from driftguard.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cmp_plugin.launch import Early
    from cmp_plugin.scan import Doc

__all__ = [
    "Deferred",
    "PendingRender",
    "RenderJob",
    "Rendered",
    "Renderer",
    "ToolRender",
    "confined",
    "start_tool",
]


class RenderJob(NamedTuple):
    """One render: the app directory inside a repository checkout, its Argo CD context, a scratch dir."""

    app_dir: Path
    repo_root: Path
    env: AppEnv
    settings: CmpSettings
    scratch: Path
    early: Early | None = None
    """The tool ``driftguard-cmp generate`` started from the launch plan, if any (cmp_plugin/launch.py)."""


class Rendered(NamedTuple):
    """The manifest stream exactly as the tool printed it; ``docs`` when the renderer parsed it already."""

    text: str
    renderer: str
    docs: list[Doc] | None = None
    warnings: tuple[str, ...] = ()
    """Lines the renderer has for the user (a skipped file), printed with the guards' warnings."""


class PendingRender(Protocol):
    """A render under way: started early so that the guards' set-up overlaps the tool's run."""

    def wait(self) -> Rendered: ...

    def cancel(self) -> None: ...


class Renderer(Protocol):
    """One tool: chosen by marker files, run with the flags Argo CD uses natively."""

    name: str

    def detect(self, app_dir: Path) -> bool:
        """Whether ``app_dir`` holds this tool's marker files."""
        ...

    def start(self, job: RenderJob) -> PendingRender:
        """Start rendering ``job.app_dir``; bad input raises here, a failing tool on ``wait()``."""
        ...


class ToolRender:
    """A render running in a child process."""

    def __init__(self, run: ToolRun, renderer: str) -> None:
        self.run = run
        self.renderer = renderer

    def wait(self) -> Rendered:
        return Rendered(self.run.wait(), self.renderer)

    def cancel(self) -> None:
        self.run.kill()


class Deferred:
    """A render done in-process when collected."""

    def __init__(self, work: Callable[[], Rendered]) -> None:
        self.work = work

    def wait(self) -> Rendered:
        return self.work()

    def cancel(self) -> None:
        return None


def start_tool(
    job: RenderJob, argv: list[str], *, env: Mapping[str, str], name: str, plannable: bool
) -> ToolRun:
    """Start the render tool, or adopt the one the launch plan started when it is exactly this command.

    ``plannable``: nothing was written for this render before the tool starts (no inline values, no
    dependency build), so the next render of the app may start the same command before it has
    checked anything; it only adopts it if its own checks arrive at the same command.
    """
    early = job.early
    started = early.adopt(argv, env) if early is not None and plannable else None
    if early is not None and started is None:
        early.close()
    run = ToolRun(
        argv,
        env=env,
        timeout=job.settings.timeout,
        max_output=job.settings.max_output_bytes,
        name=name,
        started=started,
    )
    if plannable:
        launch.record(
            early,
            cache=str(job.settings.cache_dir),
            app_name=job.env.app_name,
            argv=argv,
            env=env,
            app_dir=str(job.app_dir),
            repo=str(job.repo_root),
            scratch=str(job.scratch),
        )
    return run


def confined(job: RenderJob, relative: str, *, what: str) -> Path:
    """``relative`` resolved from the app directory; it must stay inside the repository checkout."""
    if not relative.strip():
        raise InputError(f"{what}: empty path")
    if "," in relative:
        # helm splits --values on commas: "d,/abs/path" would read /abs/path after this check passed
        raise InputError(
            f"{what} {relative!r}: a comma is not allowed in a path (helm splits --values on commas)"
        )
    candidate = Path(relative)
    if candidate.is_absolute():
        raise InputError(
            f"{what} {relative!r}: absolute paths are not allowed; use a path relative to the app directory"
        )
    root = job.repo_root.resolve()
    resolved = (job.app_dir / candidate).resolve()
    if not resolved.is_relative_to(root):
        raise InputError(
            f"{what} {relative!r} resolves outside the repository checkout; it must stay inside it"
        )
    if not resolved.is_file():
        raise InputError(
            f"{what} {relative!r} does not exist (looked for {resolved.relative_to(root)} in the repository)"
        )
    return resolved

"""Start the render tool before Python has loaded the plugin: the launch plan.

``generate`` spends ~20 ms importing what computes the tool's command line (parameters, settings,
renderers) before it can start helm, and for a small chart helm itself takes ~40 ms. So the first
thing ``driftguard-cmp generate`` does, with nothing but ``os`` loaded, is start the command the
previous render of the same Application used (the *launch plan*, kept beside the shrink baseline
cache), with this checkout's paths. Then the plugin computes the command itself, as always, and
uses the running tool only when the command and its environment are identical; otherwise it stops
it (and its children, SIGKILL) and starts the right one. Nothing the early tool does is used unless
the full computation, with every check on the way (parameters, paths confined to the checkout,
dependencies), arrives at exactly that command. Renders that write files before the tool starts
(inline ``values``, ``helm dependency build``) are never planned.

This module imports nothing beyond ``os`` and the plugin's two lowest modules (``paths``, ``spawn``):
the console entry (``cmp_plugin/__main__.py``) runs it before anything else is loaded.
"""

from __future__ import annotations

import os

from cmp_plugin.paths import (
    cache_dir,
    discard,
    new_scratch,
    open_private,
    repo_root,
    safe_name,
    scratch_root,
    write_private,
)
from cmp_plugin.spawn import kill_tree, spawn

TYPE_CHECKING = False  # typing itself is ~3 ms to import: this module runs before anything else
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["Early", "configured_tool", "early_start", "plan_file", "record", "render_cache_on"]

MAGIC = "driftguard-launch-plan 1"
_RS, _US = "\x1e", "\x1f"  # record and unit separators: never in a path, an argument or a variable
_APP, _REPO, _SCRATCH = "\x01app\x01", "\x01repo\x01", "\x01scratch\x01"


def render_cache_on(environ: Mapping[str, str]) -> bool:
    """Whether the render cache may serve this render (DRIFTGUARD_CMP_RENDER_CACHE_BYTES is not 0).

    Then no tool is started from the plan: a hit (cmp_plugin/render_cache.py) starts none at all,
    and a planned tool started and killed on every hit would cost more than the plan saves.
    """
    return environ.get("DRIFTGUARD_CMP_RENDER_CACHE_BYTES", "").strip() != "0"


def plan_file(cache: str, app_name: str) -> str:
    return os.path.join(cache, safe_name(app_name) + ".plan")


def configured_tool(path: str, environ: Mapping[str, str]) -> bool:
    """Whether ``path`` is a tool this sidecar is configured to run: DRIFTGUARD_HELM / _KUSTOMIZE, else on PATH."""
    configured = [environ.get("DRIFTGUARD_HELM", ""), environ.get("DRIFTGUARD_KUSTOMIZE", "")]
    if path in configured:
        return True
    names = [
        n
        for n, v in (("helm", configured[0]), ("kustomize", configured[1]), ("kubectl", configured[1]))
        if not v
    ]
    return any(
        path == os.path.join(d, n) for d in environ.get("PATH", "").split(os.pathsep) if d for n in names
    )


class Early:
    """A tool started from the plan, waiting to be adopted by the render or stopped."""

    def __init__(
        self, *, pid: int, fds: tuple[int, int], argv: list[str], env: dict[str, str], scratch: str, plan: str
    ) -> None:
        self.pid, self.fds, self.argv, self.env = pid, fds, argv, env
        self.scratch = scratch
        """Created by the early start; the render takes it over (and removes it) as its scratch."""
        self.plan = plan
        self.adopted = False
        self.scratch_taken = False

    def adopt(self, argv: list[str], env: Mapping[str, str]) -> tuple[int, int, int] | None:
        """(pid, stdout, stderr) when the render computed exactly this command; None otherwise."""
        if self.adopted or self.pid <= 0 or argv != self.argv or dict(env) != self.env:
            return None
        self.adopted = True
        return self.pid, self.fds[0], self.fds[1]

    def close(self) -> None:
        """Stop the tool unless it was adopted; remove the scratch unless the render took it."""
        if not self.adopted and self.pid > 0:
            kill_tree(self.pid)
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            for fd in self.fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.pid = -1
        if not self.scratch_taken:
            import shutil

            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch_taken = True


def early_start(argv: list[str], environ: Mapping[str, str]) -> Early | None:
    """Start the planned tool for ``generate``; None when there is no usable plan (never raises)."""
    if argv != ["generate"] or not environ.get("ARGOCD_APP_NAME"):
        return None
    cache, root = cache_dir(environ), scratch_root(environ)
    if not (os.path.isabs(cache) and os.path.isabs(root)):
        return None  # relative: inside the checkout, the tenant's (the settings refuse it)
    from cmp_plugin.sandbox import reaches

    if reaches(cache):
        return None  # a tool may write there: a plan found there may be a tool's (sandbox.py)
    from cmp_plugin.memory import try_slot

    if not try_slot(environ, cache):
        return None  # every render slot is taken: the pipeline waits for one before any tool starts
    path = plan_file(cache, environ["ARGOCD_APP_NAME"])
    try:
        data = open_private(path, 1 << 20)
        plan = data.decode() if data is not None else ""
    except (OSError, UnicodeDecodeError):
        return None
    sections = plan.split(_RS)
    if len(sections) != 3 or sections[0] != MAGIC:
        return None
    if not configured_tool(sections[1].split(_US)[0], environ):
        discard(path)  # a plan that runs anything but our helm or kustomize was not written by us
        return None
    scratch = ""
    try:
        app_dir = os.path.realpath(os.getcwd())
        repo = repo_root(app_dir, environ.get("ARGOCD_APP_SOURCE_PATH", ""))
        scratch = new_scratch(root)

        def expand(value: str) -> str:
            return value.replace(_SCRATCH, scratch).replace(_APP, app_dir).replace(_REPO, repo)

        tool_argv = [expand(a) for a in sections[1].split(_US)]
        from cmp_plugin.sandbox import configure

        configure(checkout=repo, scratch=scratch)
        tool_env = {}
        for item in sections[2].split(_US):
            key, sep, value = item.partition("=")
            if sep:
                tool_env[key] = expand(value)
        pid, out_fd, err_fd = spawn(tool_argv, tool_env)
    except Exception:  # a plan that cannot start is no plan: the render starts its own tool
        if scratch:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)
        return None
    return Early(pid=pid, fds=(out_fd, err_fd), argv=tool_argv, env=tool_env, scratch=scratch, plan=plan)


def record(
    early: Early | None,
    *,
    cache: str,
    app_name: str,
    argv: Iterable[str],
    env: Mapping[str, str],
    app_dir: str,
    repo: str,
    scratch: str,
) -> None:
    """Keep this render's command as the app's launch plan (when it changed); errors are ignored."""
    if not app_name:
        return

    def template(value: str) -> str:
        # the scratch first (it is not inside the checkout), then the app before the repo it is in
        return value.replace(scratch, _SCRATCH).replace(app_dir, _APP).replace(repo, _REPO)

    items = [template(a) for a in argv]
    pairs = [f"{k}={template(v)}" for k, v in env.items()]
    if any(_RS in s or _US in s for s in (*items, *pairs)):
        return
    plan = _RS.join((MAGIC, _US.join(items), _US.join(pairs)))
    if early is not None and early.plan == plan:
        return
    from cmp_plugin.sandbox import reaches

    if reaches(cache):
        return  # never read there (early_start): a tool may write the cache directory
    path = plan_file(cache, app_name)
    try:
        os.makedirs(cache, mode=0o700, exist_ok=True)
        write_private(path, plan.encode())
    except OSError:
        pass  # without a plan the next render starts its tool a little later, nothing more

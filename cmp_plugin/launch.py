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

This module imports nothing beyond ``os`` and ``sys``: ``spawn`` is also how ``process.ToolRun``
starts every tool, and the path helpers are the ones ``settings`` and ``pipeline`` use.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself is ~3 ms to import: this module runs before anything else
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "Early",
    "cache_dir",
    "configured_tool",
    "early_start",
    "kill_tree",
    "limit_resources",
    "main",
    "new_scratch",
    "open_private",
    "plan_file",
    "record",
    "repo_root",
    "safe_name",
    "scratch_root",
    "spawn",
    "write_private",
]

MAGIC = "driftguard-launch-plan 1"
_RS, _US = "\x1e", "\x1f"  # record and unit separators: never in a path, an argument or a variable
_APP, _REPO, _SCRATCH = "\x01app\x01", "\x01repo\x01", "\x01scratch\x01"


def main() -> None:
    """The ``driftguard-cmp`` console script: the early start for ``generate``, then the plugin.

    With DRIFTGUARD_CMP_PRELOAD on, ``generate`` is first offered to the preload server
    (cmp_plugin/preload.py), before this process limits itself: a server it starts must not
    inherit the one-render CPU limit.
    """
    if sys.argv[1:] == ["generate"]:
        # this process holds the Application's environment (ARGOCD_ENV_*): no /proc/<pid>/environ
        # for a tool another render runs (cmp_plugin/sandbox.py); the native front does the same
        from cmp_plugin.sandbox import undumpable

        undumpable()
    if sys.argv[1:] == ["generate"] and os.environ.get("DRIFTGUARD_CMP_PRELOAD"):
        from cmp_plugin import preload

        if preload.enabled(os.environ):
            code = preload.run_preloaded(os.environ)
            if code is not None:
                sys.stderr.flush()
                os._exit(code)
    limit_resources(sys.argv[1:], os.environ)
    early = None if render_cache_on(os.environ) else early_start(sys.argv[1:], os.environ)
    from cmp_plugin.cli import run

    run(early=early)


def render_cache_on(environ: Mapping[str, str]) -> bool:
    """Whether the render cache may serve this render (DRIFTGUARD_CMP_RENDER_CACHE_BYTES is not 0).

    Then no tool is started from the plan: a hit (cmp_plugin/render_cache.py) starts none at all,
    and a planned tool started and killed on every hit would cost more than the plan saves.
    """
    return environ.get("DRIFTGUARD_CMP_RENDER_CACHE_BYTES", "").strip() != "0"


DEFAULT_MAX_MEMORY = 768 * 1024 * 1024
"""DRIFTGUARD_CMP_MAX_MEMORY's default: under the sidecar container's 1Gi limit (manifests/base/cmp)."""


def limit_resources(argv: list[str], environ: Mapping[str, str]) -> None:
    """Cap this process's memory, and so every tool it starts (limits are inherited), before anything runs.

    RLIMIT_DATA rather than RLIMIT_AS: Go (helm, kustomize) reserves ~600 MiB of address space at
    start without using it, so an address-space cap either breaks every render or caps nothing;
    RLIMIT_DATA counts the memory actually made writable. Past it helm dies with "out of memory"
    and Python raises MemoryError, both refused with a clear message instead of the container's
    OOM kill. For ``generate`` (one render) the CPU time of each process is capped too, at twice
    DRIFTGUARD_CMP_TIMEOUT: a tool left behind by a killed plugin cannot spin for ever.
    A value the settings reject is left to them to report (cmp_plugin/settings.py).
    """
    import resource

    from cmp_plugin.memory import effective_cap

    try:
        memory = int(environ.get("DRIFTGUARD_CMP_MAX_MEMORY") or DEFAULT_MAX_MEMORY)
        timeout = float(environ.get("DRIFTGUARD_CMP_TIMEOUT") or 45.0)
    except ValueError:
        return
    memory = min(memory, effective_cap(environ))  # fitted under the container's limit (memory.py)
    limits = [(resource.RLIMIT_DATA, memory, memory)]
    if argv == ["generate"] and timeout > 0:
        cpu = int(2 * timeout) + 1
        limits.append((resource.RLIMIT_CPU, cpu, cpu + 5))
    for which, soft, hard in limits:
        if soft <= 0:
            continue
        _, old_hard = resource.getrlimit(which)
        if old_hard != resource.RLIM_INFINITY:
            hard, soft = min(hard, old_hard), min(soft, old_hard)
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            pass  # a lower limit set by someone else stays


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process it started (tools share the plugin's process group, see spawn)."""
    import signal

    try:
        os.kill(pid, signal.SIGSTOP)  # frozen first: it cannot start more children while we look
    except ProcessLookupError:
        return
    found = [pid]
    i = 0
    while i < len(found):
        for child in _children(found[i]):
            if child not in found:
                try:
                    os.kill(child, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                found.append(child)
        i += 1
    for victim in reversed(found):
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` from /proc (Linux); none where /proc cannot tell."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return out


def spawn(argv: list[str], env: Mapping[str, str]) -> tuple[int, int, int]:
    """Start ``argv`` (no shell, no PATH search) in the plugin's process group: (pid, stdout fd, stderr fd).

    Not in a session of its own: argocd-cmp-server stops a command that overruns by killing its
    process group (argoproj/argo-cd ``cmpserver/plugin/plugin.go``), and a tool that left the
    group would keep running, unbounded, after the plugin was gone. ``kill_tree`` stops one tool
    and its children without touching the plugin.
    """
    from cmp_plugin.sandbox import run_confined

    out_r, out_w = os.pipe()  # non-inheritable: the child keeps only what is dup2'ed below
    err_r, err_w = os.pipe()
    try:
        # under Landlock when a render has configured it (cmp_plugin/sandbox.py)
        pid = run_confined(
            lambda: os.posix_spawn(
                argv[0],
                argv,
                dict(env),
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, out_w, 1),
                    (os.POSIX_SPAWN_DUP2, err_w, 2),
                ],
            ),
            tool=argv[0],
        )
    except BaseException:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    return pid, out_r, err_r


def scratch_root(environ: Mapping[str, str]) -> str:
    """Where each render gets its private scratch directory: $TMPDIR, else /tmp."""
    return environ.get("TMPDIR") or "/tmp"  # noqa: S108


def cache_dir(environ: Mapping[str, str]) -> str:
    """DRIFTGUARD_CMP_CACHE_DIR, else $TMPDIR/driftguard: shrink baselines and launch plans."""
    return environ.get("DRIFTGUARD_CMP_CACHE_DIR") or os.path.join(scratch_root(environ), "driftguard")


def safe_name(app_name: str) -> str:
    """An Application name as a short file name: a readable prefix and a hash of the whole name.

    ``<ns>_<name>`` can be 63 + 1 + 253 characters, past a file name's 255 bytes; the hash keeps
    every name distinct (two names cleaned to the same prefix must not share a baseline or plan).
    """
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # the C module alone: hashlib would cost ~6 ms before the tool starts
    except ImportError:  # pragma: no cover - other Python builds
        from hashlib import sha256
    readable = "".join(c if (c.isascii() and c.isalnum()) or c in "_.-" else "_" for c in app_name[:48])
    return f"{readable}-{sha256(app_name.encode()).hexdigest()[:32]}"


def plan_file(cache: str, app_name: str) -> str:
    return os.path.join(cache, safe_name(app_name) + ".plan")


def open_private(path: str, limit: int) -> bytes | None:
    """The file's bytes when it is ours to trust; else None, and a planted file is removed.

    Trusted means: a regular file reached without a symlink, owned by this uid, not writable by
    group or others. Anyone who can write into a shared $TMPDIR could otherwise hand the next
    render a command to run (the launch plan) or a baseline to compare with.
    """
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:  # a symlink (ELOOP), a FIFO, no access: not ours
        _remove(path)
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            _remove(path)
            return None
        return os.read(fd, limit)
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_private(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, mode 0600, never through a planted symlink (OSError on failure)."""
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:  # a full disk leaves no partial .tmp behind in the shared cache directory
        _remove(tmp)
        raise


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


def new_scratch(root: str) -> str:
    """A fresh private directory for one render (helm's homes, inline values)."""
    path = os.path.join(root, f"driftguard-{os.getpid()}-{os.urandom(4).hex()}")
    os.makedirs(path, mode=0o700)
    return path


def repo_root(app_dir: str, source_path: str) -> str:
    """The checkout's root: ``app_dir`` minus ``ARGOCD_APP_SOURCE_PATH``, else the nearest parent with .git."""
    parts = [p for p in source_path.split("/") if p not in ("", ".")]
    here = app_dir.rstrip("/").split("/")
    if parts and len(here) > len(parts) and here[-len(parts) :] == parts:
        return "/".join(here[: -len(parts)]) or "/"
    candidate = app_dir
    while True:
        if os.path.exists(os.path.join(candidate, ".git")):
            return candidate
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return app_dir
        candidate = parent


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
        _remove(path)  # a plan that runs anything but our helm or kustomize was not written by us
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

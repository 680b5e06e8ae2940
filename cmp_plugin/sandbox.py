"""Render tools run under Landlock: they write only their own scratch directory and read only the
system, the tool and this render's checkout.

A tool made to run code (a post-renderer, a plugin, a template engine bug) ran as the sidecar's
user with everything that user may touch: it replaced the preload server's socket in the cache
directory and the next tenant's render handed the impostor its ``ARGOCD_ENV_*`` values. Landlock
(Linux 5.13+, unprivileged: ``no_new_privs`` and three system calls, Documentation/userspace-api/
landlock.rst) lets a process give up file access for itself and every process it starts, for
good. Each tool is spawned from a short-lived thread that first restricts itself (Landlock and
``no_new_privs`` are per thread, and ``posix_spawn`` copies the calling thread's credentials into
the child), so the plugin keeps its own access (the cache, the baselines) and the tool gets:

- read and execute beneath the system directories, the tool's own directory, the checkout;
- read and write beneath its scratch directory (HOME, TMPDIR, helm's caches) and the checkout
  (``helm dependency build`` writes ``charts/``; it is this render's own copy);
- nothing else: not the cache directory (socket, key, baselines, launch plans, render slots),
  not another render's scratch or checkout (nor through ``/proc/<pid>/cwd`` or ``mem``: Landlock
  denies ptrace attach, which those need, to a process outside the tool's domain);
- from ABI 6 (Linux 6.12) no signal to, and no abstract socket of, a process outside its domain:
  it cannot kill the preload server to take its place.
- no capability (the thread that starts it drops them all), so the plugin's processes, which
  are not dumpable (``undumpable``), keep their ``/proc/<pid>/environ`` from it: Landlock refuses
  a tool ``/proc/<pid>/mem`` of a process outside its domain (ptrace attach), but on the kernels
  tried (6.18) not ``environ`` (ptrace read), which same uid and dumpable allow.

The plugin trusts what it keeps from the tools (the preload server's socket and key, launch plans)
only in a directory no rule opens (``reaches``); its processes that hold a render's environment
are not dumpable (``undumpable``).

Where the kernel offers no Landlock, ``available()`` is False and the preload server is not used
(cmp_plugin/preload): nothing would keep a tool from replacing it.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = ["abi", "available", "clear", "configure", "reaches", "run_confined", "undumpable"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # Linux, every architecture but alpha
_VERSION = 1  # LANDLOCK_CREATE_RULESET_VERSION
_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4
_CAPABILITY_VERSION_3 = 0x20080522
# LANDLOCK_ACCESS_FS_*: execute, write, read file, read dir, remove dir/file, make char/dir/reg/
# sock/fifo/block/sym, refer (ABI 2), truncate (ABI 3), ioctl_dev (ABI 5)
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ALL_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)
_SCOPE = 0b11  # LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL (ABI 6)
# /proc: a tool reads its own entries; another process's environ, cwd, fd and mem need ptrace
# access, which Landlock denies to a process outside the tool's domain
_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/dev", "/proc")

_abi: list[int] = []
_current: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
_undumpable: list[bool] = []


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or seccomp hides it)."""
    if not _abi and not sys.platform.startswith("linux"):
        _abi.append(0)  # the syscall numbers below are Linux's (macOS has others under them)
    if not _abi:
        try:
            libc = _libc()
            version = libc.syscall(_CREATE_RULESET, None, 0, _VERSION)
            _abi.append(max(int(version), 0))
        except (OSError, AttributeError):
            _abi.append(0)
    return _abi[0]


def available() -> bool:
    return abi() >= 1


def configure(*, checkout: str, scratch: str) -> None:
    """What the tools of the render under way may reach (set before its first tool starts)."""
    _current[:] = [((checkout,), (scratch, checkout))]


def clear() -> None:
    """The render is over: tools started from now on are not this render's."""
    _current.clear()


def run_confined(spawn: Callable[[], Any], *, tool: str) -> Any:
    """``spawn()`` in a thread that has restricted itself to the configured directories.

    Without a configuration (no render under way) or without Landlock, ``spawn()`` as it is.
    An error restricting the thread is raised: a tool is never started less confined than asked.
    """
    if not _current or not available():
        return spawn()
    import _thread

    reads, writes = _current[0]
    extra_reads, extra_writes = _platform_paths()
    reads += extra_reads
    writes += extra_writes
    if not _undumpable:  # the process that starts tools holds the render's environment
        undumpable()
        _undumpable.append(True)
    done = _thread.allocate_lock()
    done.acquire()
    box: dict[str, Any] = {}

    def confined() -> None:
        try:
            _restrict_self((*reads, os.path.dirname(os.path.realpath(tool))), writes)
            box["value"] = spawn()
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.release()

    _thread.start_new_thread(confined, ())
    done.acquire()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _opened(reads: Sequence[str]) -> list[str]:
    """Every path a tool may read beneath, beyond its render's own: the system, the tools, the credentials."""
    tool_dirs = {os.path.dirname(os.path.realpath(p)) for p in _tool_paths()}
    cert_paths = [os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", "")]
    # the credentials the platform mounts for chart repositories and registries (helm_repos.py)
    cert_paths += [
        os.environ.get("DRIFTGUARD_CMP_HELM_REGISTRY_CONFIG", ""),
        os.environ.get("DRIFTGUARD_CMP_HELM_REPOSITORIES", ""),
    ]
    return [p for p in (*_SYSTEM, *sorted(tool_dirs), *cert_paths, *reads) if p]


def _platform_paths() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The platform's additions (a shared helm cache, tools kept elsewhere): never the tenant's."""
    reads = tuple(p for p in os.environ.get("DRIFTGUARD_CMP_TOOL_READ_PATHS", "").split(":") if p)
    writes = tuple(p for p in os.environ.get("DRIFTGUARD_CMP_TOOL_WRITE_PATHS", "").split(":") if p)
    return reads, writes


def reaches(path: str) -> bool:
    """Whether a render's tool may read or write ``path``: it is at or beneath a path the rules open.

    The rules are the ones ``run_confined`` gives every tool, minus the render's own checkout and
    scratch (fresh directories of their own). What the plugin keeps from the tools (the preload
    server's socket and key, launch plans) is only trusted in a directory this returns False for:
    Landlock can open a directory to a tool, never close one beneath a directory it opened.
    """
    reads, writes = _platform_paths()
    # a tool found on PATH (no DRIFTGUARD_HELM) gets its own directory: any of them may be one
    reads += tuple(p for p in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(p))
    real = os.path.realpath(path)
    for opened in (*_opened(reads), *writes):
        top = os.path.realpath(opened)  # a rule holds what the path resolves to (an opened fd)
        if real == top or real.startswith(top.rstrip("/") + "/"):
            return True
    return False


def undumpable() -> None:
    """PR_SET_DUMPABLE 0 for this process: its /proc environ, mem, fd and cwd need CAP_SYS_PTRACE.

    Landlock already denies a tool ptrace access to the plugin's processes (those entries need
    it); this holds the same where a process of the same uid runs outside Landlock. A tool's
    execve makes it dumpable again, so it never hides a tool from the plugin (kill_tree, memory).
    """
    if sys.platform.startswith("linux"):  # prctl is Linux's
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _restrict_self(reads: Sequence[str], writes: Sequence[str]) -> None:
    import ctypes

    libc = _libc()
    version = abi()
    handled = _ALL_BY_ABI.get(version, (1 << 16) - 1)
    if version >= 6:
        attr = (ctypes.c_uint64 * 3)(handled, 0, _SCOPE)
    else:
        attr = (ctypes.c_uint64 * 3)(handled, 0, 0)
    size = 24 if version >= 6 else 16 if version >= 4 else 8
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        read = EXECUTE | READ_FILE | READ_DIR
        for path, access in [*((p, read) for p in _opened(reads)), *((p, handled) for p in writes)]:
            _allow(libc, ruleset, path, access)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        # no capability either (a sidecar run as root, against the manifests): with CAP_SYS_PTRACE a
        # tool would read the plugin's /proc/<pid>/environ despite PR_SET_DUMPABLE, and Landlock
        # refuses only the attach mode (/proc/<pid>/mem), not the read mode environ needs; after
        # no_new_privs an execve grants no more than this thread keeps (capabilities(7))
        header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
        if libc.capset(ctypes.byref(header), ctypes.byref((ctypes.c_uint32 * 6)())) != 0:
            raise OSError(ctypes.get_errno(), "capset")
        if libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _allow(libc: Any, ruleset: int, path: str, access: int) -> None:
    import ctypes

    if not path:
        return
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # absent here: nothing to allow
    try:
        import stat

        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_ONLY
        rule = (ctypes.c_uint8 * 12)()
        ctypes.memmove(
            rule, access.to_bytes(8, sys.byteorder) + fd.to_bytes(4, sys.byteorder, signed=True), 12
        )
        if libc.syscall(_ADD_RULE, ruleset, _PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
    finally:
        os.close(fd)


def _tool_paths() -> list[str]:
    """The configured tools (their directories may hold what they load)."""
    return [p for p in (os.environ.get("DRIFTGUARD_HELM"), os.environ.get("DRIFTGUARD_KUSTOMIZE")) if p]


_LIBC: list[Any] = []


def _libc() -> Any:
    if not _LIBC:
        import ctypes

        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]

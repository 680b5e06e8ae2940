"""How every tool process starts and stops, and the limits it inherits.

``spawn`` (posix_spawn in the plugin's process group, under Landlock when a render configured it),
``kill_tree`` (a tool and its children) and ``limit_resources`` (memory and CPU caps set before
anything runs). Imports ``os`` only at module level: the launch plan starts the previous render's
tool with it before the plugin is loaded, and ``process.ToolRun`` starts every other tool with it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing itself is ~3 ms to import: this runs before anything else
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["DEFAULT_MAX_MEMORY", "kill_tree", "limit_resources", "spawn"]

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

"""Memory cannot take the sidecar down: renders x per-render cap stays under the container's limit.

Each ``generate`` is its own process, started by argocd-cmp-server for every Application that
needs a render, all in one container. RLIMIT_DATA caps a process (spawn.limit_resources), not a
render, and did not hold helm (Go's heap grew to ~1 GiB resident under a 768 MiB cap); two heavy
renders at once then met the container's memory limit and the kernel killed both. So:

- the container's limit is read from the cgroup (v2 ``memory.max``, v1
  ``memory.limit_in_bytes``), or from DRIFTGUARD_CMP_MEMORY_LIMIT (the Downward API's
  ``limits.memory``, where the cgroup is not visible);
- the renders that may run at once are ``(limit - HEADROOM) // cap`` (the cap lowered to fit when
  even one would not): each holds one slot, an ``flock`` on a file in the cache directory, for
  its whole life (released by the kernel whatever way it ends); a render that finds none free
  waits for one, then is refused before it starts a tool;
- helm and kustomize run with GOMEMLIMIT (process.tool_env) so Go collects before it grows, and
  the render's resident memory (the plugin and every tool it started) is measured while the tool
  runs and the tool stopped past the cap (process.ToolRun).

Imports ``os`` only (spawn.py and launch.py use it before anything else is loaded).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "HEADROOM",
    "budget",
    "container_limit",
    "effective_cap",
    "hold_slot",
    "release_slot",
    "tree_rss",
    "try_slot",
]

MiB = 1024 * 1024
HEADROOM = 128 * MiB
"""What the container needs besides renders: argocd-cmp-server and the kernel's own accounting."""
MIN_CAP = 64 * MiB
DEFAULT_CAP = 768 * MiB
_slot_fd = -1


def container_limit(environ: Mapping[str, str]) -> int | None:
    """The container's memory limit in bytes; None when it has none (or it cannot be read)."""
    raw = environ.get("DRIFTGUARD_CMP_MEMORY_LIMIT", "").strip()
    if raw:
        try:
            limit = int(raw)
        except ValueError:
            return None  # the settings report it
        return limit if limit > 0 else None
    found = [v for v in (_read_limit(d) for d in _cgroup_dirs()) if v is not None]
    return min(found) if found else None


def _read_limit(directory: str) -> int | None:
    for name in ("memory.max", "memory.limit_in_bytes"):  # cgroup v2, v1
        try:
            with open(os.path.join(directory, name)) as f:
                value = int(f.read().strip())
        except (OSError, ValueError):  # absent, or "max"
            continue
        return value if 0 < value < 1 << 60 else None  # v1 writes ~2^63 for "no limit"
    return None


def _cgroup_dirs() -> list[str]:
    """This process's memory cgroup directory and each ancestor's (a limit holds for every child).

    /proc/self/cgroup names the cgroup within its hierarchy (``0::/path`` for v2, ``N:memory:/path``
    for v1); /proc/self/mountinfo says where that hierarchy (or, in a container, its own part of
    it) is mounted. In a pod with a cgroup namespace both say ``/``: the container's own files.
    """
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        with open("/proc/self/mountinfo") as f:
            mounts = f.read().splitlines()
    except OSError:
        return []
    path, v2 = None, False
    for line in lines:
        _, controllers, where = [*line.split(":", 2), "", ""][:3]
        if "memory" in controllers.split(","):
            path = where
            break
        if controllers == "" and path is None:
            path, v2 = where, True
    if path is None:
        return []
    for mount in mounts:
        fields = mount.split(" ")
        if " - " not in mount or len(fields) < 5:
            continue
        fstype, _, options = mount.split(" - ", 1)[1].split(" ")[:3]
        wanted = fstype == "cgroup2" if v2 else fstype == "cgroup" and "memory" in options.split(",")
        root, point = fields[3], fields[4]
        if not wanted or not (path == root or path.startswith(root.rstrip("/") + "/")):
            continue
        here = os.path.join(point, path[len(root) :].lstrip("/"))
        out = []
        while True:
            out.append(here)
            if os.path.normpath(here) == os.path.normpath(point):
                return out
            here = os.path.dirname(here)
    return []


def budget(limit: int | None, cap: int) -> tuple[int, int]:
    """(renders at once, per-render cap): ``renders * cap + HEADROOM <= limit``; 0 renders: unbounded."""
    if limit is None:
        return 0, cap
    usable = limit - HEADROOM
    if usable < cap:
        return 1, max(usable, MIN_CAP)
    return usable // cap, cap


def _configured_cap(environ: Mapping[str, str]) -> int:
    try:
        cap = int(environ.get("DRIFTGUARD_CMP_MAX_MEMORY") or DEFAULT_CAP)
    except ValueError:
        return DEFAULT_CAP  # the settings report it (cmp_plugin/settings.py)
    return cap if cap > 0 else DEFAULT_CAP


def effective_cap(environ: Mapping[str, str]) -> int:
    """The per-render cap once fitted under the container's limit."""
    return budget(container_limit(environ), _configured_cap(environ))[1]


def _slots(environ: Mapping[str, str], cache: str) -> tuple[str, int]:
    slots, _ = budget(container_limit(environ), _configured_cap(environ))
    return os.path.join(cache, "render-slots"), slots


def try_slot(environ: Mapping[str, str], cache: str) -> bool:
    """Take a free render slot now (or hold one already); False when all are taken.

    The slots live in ``cache`` (paths.cache_dir: private to the sidecar's user)."""
    global _slot_fd
    if _slot_fd >= 0:
        return True
    directory, slots = _slots(environ, cache)
    if slots == 0:
        return True  # no limit to fit under
    import fcntl

    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError:
        return True  # nowhere to count: as before, RLIMIT_DATA and the RSS check alone
    for i in range(slots):
        try:
            fd = os.open(os.path.join(directory, f"slot-{i}"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _slot_fd = fd  # held until this process exits: the kernel releases it however that happens
        return True
    return False


def release_slot() -> None:
    """Give this process's render slot back (a background proof between its renders: proof_background.py)."""
    global _slot_fd
    if _slot_fd >= 0:
        fd, _slot_fd = _slot_fd, -1
        os.close(fd)


def hold_slot(environ: Mapping[str, str], cache: str, *, deadline: float) -> None:
    """Wait for a render slot until ``deadline`` (time.monotonic); RenderError when none came free."""
    import time

    delay = 0.005
    while not try_slot(environ, cache):
        if time.monotonic() + delay > deadline:
            from driftguard.errors import RenderError

            _, slots = _slots(environ, cache)
            limit = container_limit(environ) or 0
            raise RenderError(
                f"{slots} render(s) already use the container's memory ({limit // MiB} MiB, "
                f"{effective_cap(environ) // MiB} MiB each, DRIFTGUARD_CMP_MAX_MEMORY); refusing this "
                "render rather than risk the sidecar being OOM-killed: Argo CD retries it"
            )
        time.sleep(delay)  # polling a lock another render holds
        delay = min(delay * 2, 0.1)


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and every process it started (0 once it is gone)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    todo = [pid]
    seen: set[int] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/statm", "rb") as f:
                total += int(f.read().split()[1]) * page
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children", "rb") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total

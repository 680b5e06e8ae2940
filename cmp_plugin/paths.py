"""The sidecar's own files: where scratch and cache live, per-app file names, private reads and writes.

The lowest module of the plugin: it imports nothing beyond ``os``, because the launch plan
(``launch.py``) uses it before anything else is loaded; ``settings``, ``pipeline``, ``baseline``,
``content_cache`` and the preload client use the same helpers.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing itself is ~3 ms to import: this runs before anything else
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "cache_dir",
    "discard",
    "new_scratch",
    "open_private",
    "repo_root",
    "safe_name",
    "scratch_root",
    "write_private",
]


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
        discard(path)
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            discard(path)
            return None
        return os.read(fd, limit)
    finally:
        os.close(fd)


def discard(path: str) -> None:
    """Remove ``path``; nothing when it is already gone or cannot be removed."""
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
        discard(tmp)
        raise


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

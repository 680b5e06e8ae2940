"""An implicit-defaults proof that ``generate`` left pending, finished off the caller's path.

In warn mode ``generate`` proves what fits in about one more helm render and leaves the rest
pending (flip_proof.Proof.pending). Without this, each later ``generate`` of the same content paid
one more render until the proof was done (~12 on a large chart). Now, once the caller's output is
written, the same process goes on with the proof in the background:

- preloaded (preload.py): the render child leaves the caller's process group (argocd-cmp-server
  kills that group after the command), reports the exit code, and proves; the preload server
  ignores SIGCHLD, so the kernel reaps it when it ends;
- in-process: a forked child in a session of its own (the caller exits at once). Where PID 1
  reaps nothing (argocd-cmp-server) it stays a zombie once done: the preload server, on in the
  shipped sidecar, has none.

Either way the background process holds none of the caller's descriptors (stdin, stdout and stderr
are /dev/null before the caller can exit: Argo CD reads stdout until EOF), runs niced, reads a
private copy of the chart and values files (argocd-cmp-server removes the checkout after the
command) and nothing of the tenant's environment but what the render job carries. Its helm runs
are confined as a render's are (sandbox.py: the copy readable, its scratch writable; the process's
resource limits; process.ToolRun's memory cap) and each holds a render slot (memory.py), given back
between renders so that a foreground render waiting for one gets it. Bounded: one background
proof per content digest (an ``flock`` on ``proof-bg/<digest>.lock``), ``AT_ONCE`` in all, at
most flip_proof.MAX_RENDERS renders; its copy is ``driftguard-proof-<digest>`` in the scratch root,
removed when it ends (or by the next background proof of the digest, when it was killed). Each render's result goes to the content cache atomically (a
kill leaves the last settled state, which the next ``generate`` resumes), and the guard's verdicts
once every key is settled: the next ``generate`` of the same content renders helm once.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from cmp_plugin.helmchart.flip_proof import Flip, Resource
    from cmp_plugin.helmchart.implicit import Finding
    from cmp_plugin.renderers.base import RenderJob
    from driftguard.manifests import ResourceKey

__all__ = ["AT_ONCE", "Later", "claim", "offer"]

AT_ONCE = 2
"""Background proofs at once in one sidecar (each also needs a render slot for each of its renders)."""
NICE = 10
LOCKS = "proof-bg"
YIELD = 0.25
"""Seconds between a background render and the next try for a slot: a foreground render waiting
for one (memory.hold_slot polls every 0.1 s at most) takes it first."""


class Later(NamedTuple):
    """What the guard leaves for the background: everything the proof needs, nothing else."""

    job: RenderJob
    flips: list[Flip]
    base: dict[ResourceKey, Resource]
    switches: list[Finding]
    """The guard's classified switches (CANDIDATE keys still to prove)."""
    digest: str
    """The guard's verdicts digest (content_digest of the render's content)."""


_offered: list[Later] = []


def offer(notes: dict[str, object]) -> None:
    """Remember a render's pending proof (``generate`` only), for :func:`claim` once it has answered."""
    from cmp_plugin.helmchart.implicit import NOTE

    later = notes.get(NOTE + "-background")
    if isinstance(later, Later):
        _offered[:] = [later]


class Claimed(NamedTuple):
    later: Later
    job: RenderJob
    """The job over the private copy."""
    root: str
    fds: tuple[int, ...]
    lock: str


def claim() -> Claimed | None:
    """The locks and a private copy of the chart, while the checkout is still there; None: nothing
    to do, one is running for this content already, or ``AT_ONCE`` are running."""
    if not _offered:
        return None
    later = _offered.pop()
    try:
        return _claim(later)
    except Exception:  # never the caller's exit code: the next generate goes on from the cache
        return None


def _claim(later: Later) -> Claimed | None:
    import fcntl
    import shutil

    from cmp_plugin.renderers.helm import existing_values_files

    job = later.job
    if job.env.param("set-file"):
        return None  # files helm reads by argv: not copied, the proof goes on in the next generate
    locks = Path(job.settings.cache_dir) / LOCKS
    locks.mkdir(mode=0o700, parents=True, exist_ok=True)
    fds: list[int] = []

    def take(path: Path) -> bool:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        fds.append(fd)
        return True

    lock = locks / f"{later.digest}.lock"
    if not take(lock) or not any(take(locks / f"at-once-{i}") for i in range(AT_ONCE)):
        for fd in fds:
            os.close(fd)
        return None
    # one place per digest, under its lock: what a killed proof left there is removed now
    root = str(Path(job.settings.scratch_root) / f"driftguard-proof-{later.digest[:32]}")
    try:
        shutil.rmtree(root, ignore_errors=True)
        Path(root).mkdir(mode=0o700)  # fails on anything left (a symlink): then no background proof
        checkout = Path(root) / "checkout"
        work = Path(root) / "work"
        work.mkdir(mode=0o700)
        repo = job.repo_root.resolve()
        app = job.app_dir.resolve()
        # the files helm reads: the chart (the confinement walk checked every one) and values files
        shutil.copytree(app, checkout / app.relative_to(repo), symlinks=False)
        for _, path in existing_values_files(job):
            dest = checkout / path.resolve().relative_to(repo)
            if not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest)
        copy = job._replace(
            app_dir=checkout / app.relative_to(repo), repo_root=checkout, scratch=work, early=None
        )
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        for fd in fds:
            os.close(fd)
        raise
    return Claimed(later, copy, root, tuple(fds), str(lock))


def detach(claimed: Claimed) -> None:
    """In-process ``generate``: prove in a forked child of its own session; the caller goes on to exit."""
    try:
        pid = os.fork()
    except OSError:
        return
    if pid:
        return
    try:
        os.setsid()  # out of the caller's process group, which argocd-cmp-server kills
        prove(claimed)
    finally:
        os._exit(0)


def prove(claimed: Claimed) -> None:
    """Finish the proof (this process is the background now); never raises."""
    import shutil

    try:
        _quiet(claimed.fds)
        with contextlib.suppress(OSError):
            os.nice(NICE)
        for key in [k for k in os.environ if k.startswith(("ARGOCD_", "PARAM_"))]:
            del os.environ[key]  # the job carries what the render reads of them
        _prove(claimed)
    except BaseException:  # noqa: S110 - nobody reads this process's output: the next generate goes on
        pass
    finally:
        with contextlib.suppress(OSError):
            Path(claimed.lock).unlink()  # once done; a killed proof's lock is released by the kernel
        shutil.rmtree(claimed.root, ignore_errors=True)


def _quiet(keep: tuple[int, ...]) -> None:
    """No descriptor of the caller's left open here: /dev/null for 0-2, every other one closed."""
    from cmp_plugin import memory

    memory.release_slot()  # the render's slot: taken again for each background render
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, max(low, os.sysconf("SC_OPEN_MAX")))  # the /dev/null above too


def _state(claimed: Claimed, text: str) -> None:
    """What the background does, in its lock file (for people and tests: ``proving PID``, ``waiting N``)."""
    with contextlib.suppress(OSError):
        fd = claimed.fds[0]
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{text}\n".encode(), 0)


def _prove(claimed: Claimed) -> None:
    import time

    from cmp_plugin import memory, sandbox
    from cmp_plugin.content_cache import cache_put
    from cmp_plugin.helmchart.flip_proof import ProofRun, content_digest
    from cmp_plugin.helmchart.flip_records import MAX_RENDERS
    from cmp_plugin.helmchart.implicit import VERDICTS_VERSION, dump_switches, verdicts_of

    later, job = claimed.later, claimed.job
    if content_digest(job, VERDICTS_VERSION) != later.digest:
        return  # the copy is not what was rendered: nothing written under the render's digest
    settings = job.settings
    give_up = time.monotonic() + 4 * settings.timeout  # waiting for slots, in all
    sandbox.configure(checkout=str(job.repo_root), scratch=str(job.scratch))
    waited = 0
    for _ in range(MAX_RENDERS):
        while not memory.try_slot(os.environ, str(settings.cache_dir)):
            waited += 1
            _state(claimed, f"waiting {waited}")
            if time.monotonic() > give_up:
                return  # the next generate goes on from the cache
            time.sleep(YIELD)  # polling a slot a render holds
        _state(claimed, f"proving {os.getpid()}")
        run = ProofRun(job, later.flips)
        try:
            proof = run.finish(later.base, budget=0.0)  # one render: the slot is given back after it
        finally:
            run.cancel()
            memory.release_slot()
        if not proof.pending:
            flips = {f.key: f for f in later.flips}
            switches = verdicts_of(later.switches, proof, flips)
            cache_put(settings.cache_dir, f"verdicts-{later.digest}", dump_switches(switches))
            return
        time.sleep(YIELD)  # a foreground render waiting for a slot takes it now

"""Prometheus metrics for both services through prometheus-client, gunicorn's workers included.

Under gunicorn every worker is its own process, so the services run prometheus-client in its
multiprocess mode: ``prepare_multiprocess_dir`` (called by a service's CLI before it execs
gunicorn) points ``PROMETHEUS_MULTIPROC_DIR`` at an empty folder, each worker writes its values
there, ``exposition`` merges them, and gunicorn's ``child_exit`` hook (``driftguard.gunicorn_conf``)
marks a dead worker's live gauges gone. Without that variable (tests, a plain ``flask run``) the
process-local default registry is used.

Label values must come from known sets (``bounded``): a label built from request input would let
anyone grow ``/metrics`` without bound or inject series.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess

__all__ = ["MULTIPROC_ENV", "bounded", "exposition", "mark_dead", "prepare_multiprocess_dir"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare_multiprocess_dir(path: Path) -> None:
    """Make ``path`` an empty folder for this run's worker files and export it to the children."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, mode=0o700)
    os.environ[MULTIPROC_ENV] = str(path)


def exposition() -> tuple[bytes, str]:
    """The text exposition of every metric (all workers' when in multiprocess mode) and its content type."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def mark_dead(pid: int) -> None:
    """Forget a dead worker's live gauges (gunicorn ``child_exit``)."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def bounded(value: str, known: Collection[str], *, other: str = "unknown") -> str:
    """``value`` when it is one of ``known``, else ``other``: label values never come from input."""
    return value if value in known else other

"""gunicorn settings shared by both services (``gunicorn -c python:driftguard.gunicorn_conf``)."""

from __future__ import annotations

from typing import Any

from driftguard.metrics import mark_dead


def child_exit(server: Any, worker: Any) -> None:
    """A worker that exited leaves no live gauges behind in the metrics."""
    mark_dead(worker.pid)

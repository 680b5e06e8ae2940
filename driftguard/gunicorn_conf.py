"""gunicorn settings shared by both services (``gunicorn -c python:driftguard.gunicorn_conf``)."""

from __future__ import annotations

import gc
from typing import Any

from driftguard.metrics import mark_dead


def post_worker_init(worker: Any) -> None:
    """The app is loaded: move everything alive now out of the garbage collector's sight.

    Flask, Jinja, psycopg, prometheus-client and the app's own tables are a few hundred thousand
    long-lived objects; every full collection walked all of them, a pause of tens of milliseconds
    in the middle of whichever request triggered it (the admission webhook's p99 showed them).
    ``gc.freeze()`` keeps them out of every later one (the CPython docs' advice for pre-fork
    servers); what requests allocate is collected as before. No collection first: it would cost the
    boot that same pause while probes wait, for the little import-time garbage it could free.
    """
    gc.freeze()


def child_exit(server: Any, worker: Any) -> None:
    """A worker that exited leaves no live gauges behind in the metrics."""
    mark_dead(worker.pid)

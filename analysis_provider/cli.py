"""driftguard-analysis: run the Argo Rollouts web metric gates under gunicorn.

driftguard-analysis [--bind 0.0.0.0:8080] [--workers 2] [--threads 8]
"""

from __future__ import annotations

import argparse
import os
import sys

from driftguard.console import add_version
from driftguard.errors import DriftguardError
from driftguard.service import exec_gunicorn

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="driftguard-analysis",
        description="Argo Rollouts web metric gates: drift, sync, success-rate, freeze",
    )
    add_version(parser)
    parser.add_argument("--bind", default=os.environ.get("DRIFTGUARD_ANALYSIS_BIND", "0.0.0.0:8080"))
    parser.add_argument(
        "--workers", type=int, default=int(os.environ.get("DRIFTGUARD_ANALYSIS_WORKERS", "2"))
    )
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args(argv)
    from analysis_provider.app import create_app

    # validated once here, so a bad setting is one line in the pod's log, not a traceback per worker
    try:
        create_app()
    except DriftguardError as exc:
        print(f"driftguard-analysis: error: {exc}", file=sys.stderr)
        return 2
    exec_gunicorn(
        "analysis_provider.app:create_app()", bind=args.bind, workers=args.workers, threads=args.threads
    )
    return 0  # pragma: no cover

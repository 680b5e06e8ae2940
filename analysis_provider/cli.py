"""driftguard-analysis: run the Argo Rollouts web metric gates under gunicorn.

driftguard-analysis [--bind 0.0.0.0:8080] [--workers 2] [--threads 8]
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="driftguard-analysis",
        description="Argo Rollouts web metric gates: drift, sync, success-rate, freeze",
    )
    parser.add_argument("--bind", default=os.environ.get("DRIFTGUARD_ANALYSIS_BIND", "0.0.0.0:8080"))
    parser.add_argument(
        "--workers", type=int, default=int(os.environ.get("DRIFTGUARD_ANALYSIS_WORKERS", "2"))
    )
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args(argv)
    argv_ = [
        sys.executable,
        "-m",
        "gunicorn",
        "--bind",
        args.bind,
        "--workers",
        str(args.workers),
        "--threads",
        str(args.threads),
    ]
    argv_ += ["--worker-class", "gthread", "--access-logfile", "-", "analysis_provider.app:create_app()"]
    os.execv(sys.executable, argv_)  # noqa: S606 - fixed argv, no shell
    return 0  # pragma: no cover

"""driftguard-notifier: run the notifier under gunicorn, or check its configuration.

driftguard-notifier [--bind 0.0.0.0:8080] [--workers 2] [--threads 4]
driftguard-notifier --check-config
driftguard-notifier preview --managed-resources FILE --app FILE --channel feishu|slack|pagerduty [--locale]
"""

from __future__ import annotations

import argparse
import os
import sys

from driftguard.errors import DriftguardError
from driftguard.service import exec_gunicorn

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["preview"]:
        from notifier.preview import main as preview

        return preview(argv[1:])
    parser = argparse.ArgumentParser(
        prog="driftguard-notifier",
        description="Argo CD notifications in, drift alerts out (Feishu, Slack, PagerDuty)",
    )
    parser.add_argument("--bind", default=os.environ.get("DRIFTGUARD_NOTIFIER_BIND", "0.0.0.0:8080"))
    parser.add_argument(
        "--workers", type=int, default=int(os.environ.get("DRIFTGUARD_NOTIFIER_WORKERS", "2"))
    )
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="validate settings, config, templates, channels and the outbox, then exit",
    )
    args = parser.parse_args(argv)
    from notifier.app import load

    # validated once here, so a bad setting is one line in the pod's log, not a traceback per worker
    try:
        _, config, channels, outbox = load()
    except DriftguardError as exc:
        print(f"driftguard-notifier: error: {exc}", file=sys.stderr)
        return 2
    outbox.close()
    if args.check_config:
        print(
            f"driftguard-notifier: config ok: channels {', '.join(sorted(channels))}; {len(config.routes)} route(s)"
        )
        return 0
    exec_gunicorn("notifier.app:create_app()", bind=args.bind, workers=args.workers, threads=args.threads)
    return 0  # pragma: no cover

"""driftguard-notifier: run the notifier under gunicorn, or check its configuration.

driftguard-notifier [--bind 0.0.0.0:8080] [--workers 2] [--threads 4] [--part admission ...]
driftguard-notifier --check-config
driftguard-notifier incidents [--app NAME] [--since 7d] [--who alice@example.com] [--json] [--database-url URL]
driftguard-notifier preview --managed-resources FILE --app FILE --channel TYPE [--locale]  (TYPE: a registered channel)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from driftguard.console import add_version, quiet_on_closed_pipe
from driftguard.errors import DriftguardError
from driftguard.service import exec_gunicorn

__all__ = ["main"]


# the subcommands, dispatched before the server's own options are parsed; --help lists them
COMMANDS = {
    "incidents": "the drift journal: episodes, who changed what, time to alert and to heal",
    "preview": "print the payload a channel would be sent for a saved Application and its resources",
}


def main(argv: list[str] | None = None) -> int:
    return quiet_on_closed_pipe(lambda: _main(sys.argv[1:] if argv is None else argv))


def _main(argv: list[str]) -> int:
    if argv[:1] == ["incidents"]:
        from notifier.journal.command import main as incidents

        return incidents(argv[1:])
    if argv[:1] == ["preview"]:
        from notifier.preview import main as preview

        return preview(argv[1:])
    from notifier.settings import PARTS

    width = max(map(len, COMMANDS))
    parser = argparse.ArgumentParser(
        prog="driftguard-notifier",
        usage="%(prog)s [options] | %(prog)s {" + ",".join(COMMANDS) + "} ...",
        description="Argo CD notifications in, drift alerts out (Feishu, Slack, PagerDuty). "
        "Without a command: run the notifier under gunicorn.",
        epilog="commands (each has its own --help):\n"
        + "\n".join(f"  {name.ljust(width)}  {text}" for name, text in COMMANDS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version(parser)
    parser.add_argument("--bind", default=os.environ.get("DRIFTGUARD_NOTIFIER_BIND", "0.0.0.0:8080"))
    parser.add_argument(
        "--workers", type=int, default=int(os.environ.get("DRIFTGUARD_NOTIFIER_WORKERS", "2"))
    )
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument(
        "--certfile",
        default=os.environ.get("DRIFTGUARD_NOTIFIER_TLS_CERT", ""),
        help="serve TLS with this certificate (the admission listener: the API server calls webhooks only over TLS)",
    )
    parser.add_argument("--keyfile", default=os.environ.get("DRIFTGUARD_NOTIFIER_TLS_KEY", ""))
    parser.add_argument(
        "--part",
        action="append",
        choices=PARTS,
        default=[],
        help="serve only this part (repeat for several; default: all). The admission listener runs "
        "`--part admission`: it reads no channel config or secret",
    )
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="validate settings, config, templates, channels and the outbox, then exit",
    )
    args = parser.parse_args(argv)
    if bool(args.certfile) != bool(args.keyfile):
        print("driftguard-notifier: error: --certfile and --keyfile go together", file=sys.stderr)
        return 2
    for path in (args.certfile, args.keyfile):
        if path and not Path(path).is_file():
            print(
                f"driftguard-notifier: error: {path} does not exist (DRIFTGUARD_NOTIFIER_TLS_CERT/_KEY)",
                file=sys.stderr,
            )
            return 2
    from notifier.app import load

    parts = tuple(args.part) or PARTS
    # validated once here, so a bad setting is one line in the pod's log, not a traceback per worker
    try:
        _, config, channels, outbox = load(parts=parts)
    except DriftguardError as exc:
        print(f"driftguard-notifier: error: {exc}", file=sys.stderr)
        return 2
    outbox.close()
    if args.check_config:
        if config is None:
            print(f"driftguard-notifier: config ok: parts {', '.join(parts)}")
            return 0
        print(
            f"driftguard-notifier: config ok: channels {', '.join(sorted(channels))}; {len(config.routes)} route(s)"
        )
        return 0
    exec_gunicorn(
        "notifier.app:create_app()" if parts == PARTS else f"notifier.app:create_app(parts={parts!r})",
        bind=args.bind,
        workers=args.workers,
        threads=args.threads,
        certfile=args.certfile,
        keyfile=args.keyfile,
    )
    return 0  # pragma: no cover

"""``driftguard-notifier incidents``: the drift journal for the terminal.

``kubectl exec deploy/driftguard-notifier -- driftguard-notifier incidents [--app NAME] [--since 7d]
[--who alice@example.com] [--json] [--database-url URL]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from driftguard.errors import DriftguardError
from notifier.journal.routes import parse_since
from notifier.journal.store import OutboxJournal, summary
from notifier.outbox import Outbox, SqliteOutbox

__all__ = ["main"]


def main(argv: list[str]) -> int:
    """The drift journal for the terminal (``kubectl exec deploy/driftguard-notifier -- driftguard-notifier incidents``)."""

    parser = argparse.ArgumentParser(
        prog="driftguard-notifier incidents", description="drift episodes, newest first"
    )
    parser.add_argument("--app", default="", help="Application name or namespace/name")
    parser.add_argument("--who", default="", help="a person or a field manager")
    parser.add_argument(
        "--since", default="7d", help="epoch, RFC 3339, or a duration: 90m, 24h, 7d (default 7d)"
    )
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--json", action="store_true", help="the /v1/incidents answer")
    parser.add_argument(
        "--outbox",
        default=os.environ.get("DRIFTGUARD_NOTIFIER_OUTBOX", "/var/lib/driftguard/outbox.sqlite3"),
        help="the outbox file (DRIFTGUARD_NOTIFIER_OUTBOX)",
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DRIFTGUARD_NOTIFIER_DATABASE_URL", ""),
        help="the PostgreSQL outbox the replicas share (DRIFTGUARD_NOTIFIER_DATABASE_URL); wins over --outbox",
    )
    args = parser.parse_args(argv)
    try:
        since = parse_since(args.since)
        outbox: Outbox
        if args.database_url:
            from notifier.outbox.postgres import PostgresOutbox

            outbox = PostgresOutbox(args.database_url)
        elif not Path(args.outbox).is_file():
            raise DriftguardError(
                f"{args.outbox} does not exist (set DRIFTGUARD_NOTIFIER_OUTBOX or --outbox,"
                " or DRIFTGUARD_NOTIFIER_DATABASE_URL for PostgreSQL)"
            )
        else:
            outbox = SqliteOutbox(Path(args.outbox))
        episodes = OutboxJournal(outbox).episodes(app=args.app, who=args.who, since=since, limit=args.limit)
        outbox.close()
    except (ValueError, DriftguardError) as exc:
        print(f"driftguard-notifier: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"episodes": episodes, "summary": summary(episodes)}, indent=2, ensure_ascii=False))
        return 0
    if not episodes:
        print("no drift episode matches")
        return 0
    for e in episodes:
        d = e["durations_ms"]
        alert = "-" if d["to_alert"] is None else f"{d['to_alert'] / 1000:.1f}s"
        heal = "open" if e["open"] else f"{d['to_heal'] / 1000:.1f}s ({e['healed_by']})"
        fields = ", ".join(f"{c['kind']} {c['name']} {c['path'] or '(object)'}" for c in e["changes"][:3])
        more = f" +{len(e['changes']) - 3}" if len(e["changes"]) > 3 else ""
        print(f"{e['changed_at']}  {e['app']}  {e['actor']}")
        print(f"    {fields}{more}")
        print(f"    alerted after {alert} on {', '.join(e['alerted_at']) or 'no channel'}; healed: {heal}")
    s = summary(episodes)
    people = ", ".join(f"{p['who']} ({p['episodes']})" for p in s["top_people"])
    print(f"{s['episodes']} episode(s); top people: {people}")
    return 0

"""driftguard-notifier: the Argo CD Notifications webhook receiver (not built yet)."""

from __future__ import annotations

import sys

USAGE = """usage: driftguard-notifier

Receives Argo CD Notifications webhooks and sends field-level drift alerts.
Run it under gunicorn: gunicorn 'notifier.app:create_app()'  (not built yet)
"""


def main(argv: list[str] | None = None) -> int:
    """Print the usage; the service itself lands with the notifier issue."""
    sys.stdout.write(USAGE)
    return 0

"""driftguard-analysis: the Argo Rollouts web metric provider (not built yet)."""

from __future__ import annotations

import sys

USAGE = """usage: driftguard-analysis

Answers Argo Rollouts web metrics to gate canary steps.
Run it under gunicorn: gunicorn 'analysis_provider.app:create_app()'  (not built yet)
"""


def main(argv: list[str] | None = None) -> int:
    """Print the usage; the service itself lands with the analysis provider issue."""
    sys.stdout.write(USAGE)
    return 0

"""driftguard-cmp: the Config Management Plugin's commands (rendering lands with the CMP issue)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Print the usage until the commands land."""
    sys.stdout.write("usage: driftguard-cmp {generate,discover,parameters,render,diff}\n")
    return 0

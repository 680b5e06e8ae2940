"""What every console script shares: ``--version``, and a quiet end when the reader goes away.

``driftguard-notifier preview ... | head`` closes the pipe before the output is written: Python
then raises BrokenPipeError from the write (or from the flush at exit), and prints a traceback.
The Python documentation's recipe (the ``signal`` module, "Note on SIGPIPE") is followed: stop,
point stdout at /dev/null so the interpreter's last flush cannot fail again, and exit with the
status a shell reports for a command ended by SIGPIPE (128 + 13).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from importlib import metadata

__all__ = ["SIGPIPE_STATUS", "add_version", "quiet_on_closed_pipe", "version"]

SIGPIPE_STATUS = 128 + int(signal.SIGPIPE)


def version() -> str:
    """The installed distribution's version (the source tree's when it is not installed)."""
    try:
        return metadata.version("driftguard")
    except metadata.PackageNotFoundError:
        from driftguard import __version__

        return __version__


def add_version(parser: argparse.ArgumentParser) -> None:
    """``PROG --version`` prints ``PROG VERSION`` and exits 0."""
    parser.add_argument("--version", action="version", version=f"{parser.prog} {version()}")


def quiet_on_closed_pipe(main: Callable[[], int]) -> int:
    """Run ``main``; a closed stdout ends it with SIGPIPE_STATUS and no traceback."""
    try:
        code = main()
        sys.stdout.flush()  # inside the guard: a small output is only written here
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return SIGPIPE_STATUS
    return code

"""``python -m cmp_plugin``."""

from cmp_plugin.cli import run

run()

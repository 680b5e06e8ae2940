"""``python -m cmp_plugin``."""

import sys

from cmp_plugin.cli import main

sys.exit(main())

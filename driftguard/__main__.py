"""``python -m driftguard diff ...``."""

import sys

from driftguard.cli import main

sys.exit(main())

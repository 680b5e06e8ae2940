"""``python -m driftguard diff ...``."""

import sys

from driftguard.diffcmd import main

sys.exit(main())

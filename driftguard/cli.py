"""The ``driftguard`` console script (pyproject's ``[project.scripts]``); nothing imports this module.

``driftguard diff`` itself, its flags, exit status and output, is ``driftguard/diffcmd.py``.
"""

from __future__ import annotations

from driftguard.diffcmd import main

__all__ = ["main"]

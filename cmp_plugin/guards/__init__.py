"""Guards behind one small interface (base.py), one module each, registered in registry.py."""

from __future__ import annotations

from cmp_plugin.guards.base import RENDER, SOURCE, Guard, GuardContext

__all__ = ["RENDER", "SOURCE", "Guard", "GuardContext"]

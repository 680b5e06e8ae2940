"""The alert path: expand a notification (``expand.py``), plan its messages (``plan.py``: routes,
dedup, resolves, ``notices.py``, ``reverted.py``), queue and send them (``worker.py``)."""

from __future__ import annotations

__all__ = ["RESOLVE_TRIGGERS"]

RESOLVE_TRIGGERS = frozenset({"on-sync-succeeded", "on-drift-resolved"})
"""The triggers after which the worker may send a resolve (the manifests subscribe to them)."""

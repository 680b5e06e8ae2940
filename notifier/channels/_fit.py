"""Fitting a digest into a channel's limits, measured on the rendered payload.

Every channel lists the same items in the same order (kinds to be pruned or missing, protected
first; then field changes, newest first), takes the longest prefix whose rendered message is
within its limits, and says exactly what it left out in the "more" line, which is always there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["MAX_ITEMS", "items", "largest", "left_out"]

MAX_ITEMS = 25
"""Lines a chat message lists at most, even when more would fit: read in seconds, not scrolled."""


def items(d: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """("group", g) for each kind, then ("change", f) for each field change."""
    return [("group", g) for g in d["groups"]] + [("change", f) for f in d["fields"]]


def left_out(d: dict[str, Any], shown: int) -> dict[str, int]:
    """What the first ``shown`` items leave out: kinds (and their resources) and field changes."""
    groups = d["groups"]
    hidden_groups = groups[shown:] if shown < len(groups) else []
    shown_fields = max(0, shown - len(groups))
    return {
        "kinds": len(hidden_groups),
        "resources": sum(g["count"] for g in hidden_groups),
        "fields": len(d["fields"]) - shown_fields,
        "total": d["total"],
    }


def largest(n: int, ok: Callable[[int], bool]) -> int:
    """The largest k in [0, n] with ok(k): a binary search (size grows with k), then checked downwards."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    while lo > 0 and not ok(lo):
        lo -= 1
    return lo

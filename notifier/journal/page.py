"""The ``/incidents`` page: ``templates/journal.html.j2`` rendered with autoescape (every value escaped).

The view holds data only (the timeline bar's geometry is computed here); the markup is the
template's. No external assets (inline CSS, no script), so the page works air-gapped.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jinja2

__all__ = ["TITLE", "journal_page", "message_page"]

TITLE = "Drift journal"

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parents[1] / "templates")),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def _dur(ms: int | None) -> str:
    if ms is None:
        return "–"
    if ms < 1000:
        return f"{ms} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    if ms < 7_200_000:
        return f"{ms / 60000:.0f} min"
    return f"{ms / 3_600_000:.1f} h"


_ENV.filters["dur"] = _dur


def _bar(e: dict[str, Any], now: float) -> dict[str, Any]:
    """changed -> first alert (amber) -> healed (blue); an open episode's rest is hatched up to now."""
    t = e["times"]
    start = t["changed"]
    first = min(t["alerted"].values()) if t["alerted"] else None
    end = t["healed"] or now
    span = max(end - start, 1e-3)
    return {
        "alert_pct": 100.0 * ((first or end) - start) / span,
        "title": f"changed → alerted {_dur(e['durations_ms']['to_alert'])} → healed {_dur(e['durations_ms']['to_heal'])}",
        "rest": "s2" if t["healed"] else "s2 open",
    }


def message_page(message: str, *, login_form: bool = False) -> str:
    """The page with one message (an error, or why reading is refused) and, when asked, the token form."""
    return _ENV.get_template("journal.html.j2").render(
        title=TITLE, message=message, login_form=login_form, journal=None
    )


def journal_page(
    query: dict[str, Any], since: str, week: dict[str, Any], episodes: list[dict[str, Any]]
) -> str:
    """The filters (``query``, ``since`` as typed), the last week's ``summary`` and the episodes."""
    now = time.time()
    journal = {
        "query": query,
        "since": since,
        "summary": week,
        "episodes": [{**e, "bar": _bar(e, now)} for e in episodes],
    }
    return _ENV.get_template("journal.html.j2").render(
        title=TITLE, message="", login_form=False, journal=journal
    )

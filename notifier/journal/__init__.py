"""The drift journal: every drift episode from change to alert to heal.

``store.py`` keeps it in the outbox's store, ``routes.py`` serves ``GET /v1/incidents`` and the
``/incidents`` page (``page.py``, a jinja2 template with autoescape), ``command.py`` is
``driftguard-notifier incidents``.
"""

from __future__ import annotations

from notifier.journal.store import Journal, OutboxJournal, episode_view, summary

__all__ = ["Journal", "OutboxJournal", "episode_view", "summary"]

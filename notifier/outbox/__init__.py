"""The durable outbox: one interface (``Outbox``), two stores.

SQLite (``SqliteOutbox``) is the embedded default: one replica, a file on a volume. PostgreSQL
(``PostgresOutbox``) is selected by ``DRIFTGUARD_NOTIFIER_DATABASE_URL`` and lets any number of
replicas accept and deliver. The SQL both run is in ``base.py`` (the outbox's queries) and
``store.py`` (the public API the identity store, the witness and the journal use, and the
schema); the behaviour tests run on both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from notifier.outbox.base import SCHEMA_VERSION, Claimed, Outbox
from notifier.outbox.sqlite import SqliteOutbox

if TYPE_CHECKING:
    from notifier.settings import NotifierSettings

__all__ = ["SCHEMA_VERSION", "Claimed", "Outbox", "SqliteOutbox", "open_outbox"]


def open_outbox(settings: NotifierSettings) -> Outbox:
    """The store the settings name (PostgreSQL when a database URL is set), schema migrated."""
    if settings.database_url:
        from notifier.outbox.postgres import PostgresOutbox  # psycopg is loaded only when used

        return PostgresOutbox(settings.database_url, lease=settings.lease)
    return SqliteOutbox(settings.outbox, lease=settings.lease)

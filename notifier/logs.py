"""JSON log lines on stderr. Callers pass fields, never URLs, tokens or Secret values."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from driftguard.redact import scrub_text

__all__ = ["configure", "event"]

_LOGGER = logging.getLogger("driftguard.notifier")


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        line.update(getattr(record, "fields", {}))
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(level: str = "INFO") -> None:
    """Send the notifier's logs to stderr as JSON (idempotent)."""
    if any(getattr(h, "_driftguard", False) for h in _LOGGER.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter())
    handler._driftguard = True  # type: ignore[attr-defined]
    _LOGGER.addHandler(handler)
    _LOGGER.setLevel(level)
    _LOGGER.propagate = False


def event(name: str, *, level: int = logging.INFO, **fields: Any) -> None:
    """One structured log line; string fields pass ``scrub_text`` (a URL in an error keeps no credential)."""
    clean = {k: scrub_text(v) if isinstance(v, str) else v for k, v in fields.items()}
    _LOGGER.log(level, name, extra={"fields": clean})

"""A short per-key cache with request coalescing: a fleet of AnalysisRuns asking the same question
at once causes one upstream look-up, and its answer serves them all for ``ttl`` seconds.
Failures are not cached: the next request looks again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Coalescing"]

T = TypeVar("T")


class _Flight(Generic[T]):
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None


class Coalescing(Generic[T]):
    def __init__(self, ttl: float, *, max_entries: int = 10_000) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._values: dict[Hashable, tuple[float, T]] = {}
        self._flights: dict[Hashable, _Flight[T]] = {}
        self.computed = 0

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        now = time.monotonic()
        with self._lock:
            hit = self._values.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not leader:
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            return flight.value  # type: ignore[return-value]
        try:
            value = compute()
            flight.value = value
            with self._lock:
                self.computed += 1
                if len(self._values) >= self.max_entries:
                    self._values.clear()
                if self.ttl > 0:
                    self._values[key] = (time.monotonic() + self.ttl, value)
            return value
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                self._flights.pop(key, None)
            flight.done.set()

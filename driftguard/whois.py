"""A client of the notifier's ``POST /v1/identities/match``: who made these writes (the person or None).

The notifier holds the identity store (audit and admission records); a reader elsewhere (the PR
check's ``--live``) sends the writes it sees, each as its managedFields entry names it, and gets
back the person per write in the same order (notifier/whois.py documents the endpoint). The
client lives here, below the apps, because apps never import each other.

Bounded: at most ``MAX_WRITES`` writes per question (the endpoint's limit; more are asked in
several questions), the answer read up to ``MAX_ANSWER`` bytes within one deadline. The token is a
session header only: errors name the notifier and what went wrong, never the token.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from driftguard import upstream
from driftguard.errors import UpstreamUnavailable

__all__ = ["MAX_ANSWER", "MAX_WRITES", "IdentityMatch", "Person"]

MAX_WRITES = 100
"""Writes per question: the endpoint's own bound (notifier/whois.py MAX_WRITES)."""
MAX_ANSWER = 256 * 1024
"""Bytes of one answer read at most: a hundred matches are well under 20 KB."""
WHO = "the notifier"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SOURCES = ("audit", "admission")


@dataclass(frozen=True)
class Person:
    """The person whose record matched a write, where the record came from, and when (epoch seconds)."""

    user: str
    source: str
    at: float | None = None


class IdentityMatch:
    """``POST {url}/v1/identities/match`` with the notifier's read token."""

    def __init__(
        self, url: str, *, token: str, timeout: float = 5.0, ca_file: str = "", max_answer: int = MAX_ANSWER
    ) -> None:
        import requests

        self.url = url.rstrip("/") + "/v1/identities/match"
        self.timeout = timeout
        self.max_answer = max_answer
        self.verify: bool | str = ca_file or True
        self._session = requests.Session()
        self._session.headers["Accept"] = "application/json"
        self._session.headers["Authorization"] = f"Bearer {token}"
        self._session.max_redirects = 0  # a redirect is an answer nobody asked for

    def match(
        self, writes: Sequence[Mapping[str, Any]], *, deadline: float | None = None
    ) -> list[Person | None]:
        """The person behind each write, in order (None: no record matched); UpstreamError otherwise."""
        out: list[Person | None] = []
        for start in range(0, len(writes), MAX_WRITES):
            out += self._ask(writes[start : start + MAX_WRITES], deadline)
        return out

    def _ask(self, writes: Sequence[Mapping[str, Any]], deadline: float | None) -> list[Person | None]:
        until = time.monotonic() + self.timeout
        if deadline is not None:
            until = min(until, deadline)
        resp = upstream.post(
            self._session,
            self.url,
            who=WHO,
            deadline=until,
            body={"writes": list(writes)},
            verify=self.verify,
            max_body=self.max_answer,
        )
        if resp.status != 200:
            raise UpstreamUnavailable(f"{WHO} answered HTTP {resp.status}")
        try:
            body = upstream.strict_json(resp.body)
        except ValueError as exc:
            raise UpstreamUnavailable(f"{WHO} answered something that is not JSON") from exc
        matches = body.get("matches") if isinstance(body, dict) else None
        if not isinstance(matches, list) or len(matches) != len(writes):
            raise UpstreamUnavailable(f"{WHO} answered no list of {len(writes)} matches")
        return [_person(m, n) for n, m in enumerate(matches)]

    def close(self) -> None:
        self._session.close()


def _person(match: Any, n: int) -> Person | None:
    if match is None:
        return None
    user = match.get("user") if isinstance(match, dict) else None
    if (
        not isinstance(user, str)
        or not user
        or len(user) > 256
        or _CONTROL.search(user)
        or match.get("source") not in _SOURCES
    ):
        raise UpstreamUnavailable(f"{WHO} answered matches[{n}] that is not a person from audit or admission")
    at = match.get("at")
    return Person(user, str(match["source"]), float(at) if isinstance(at, int | float) else None)

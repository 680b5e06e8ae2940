"""Who made a drift, asked of the notifier's identity store: an optional enrichment of the drift gate.

The identity store (audit and admission records) lives in the notifier; the apps never import each
other, so the gate asks over HTTP: ``POST /v1/identities/match`` on the notifier with its read token
(notifier/whois.py), for the human changes the gate shows. The notifier runs the one join rule
(driftguard/identity.py ``best_match``) and answers the person, or null, per write.

Opt-in (``DRIFTGUARD_ANALYSIS_NOTIFIER_URL``) and never decisive: the verdict comes from Argo CD
alone. A notifier that is down, slow, answers garbage, too much, or 401 yields :class:`Lookup` with
``failed`` set; the gate then names the field manager and says no identity was available. The
question is bounded (``SHOWN`` writes), the answer capped at ``MAX_ANSWER`` bytes, and the read
gets ``DRIFTGUARD_ANALYSIS_NOTIFIER_TIMEOUT`` at most, never past the request's own deadline. The
token is a session header only: errors name the notifier and what went wrong, never the token.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from driftguard import upstream
from driftguard.drift import HUMAN, Classified
from driftguard.errors import UpstreamError, UpstreamUnavailable

__all__ = ["MAX_ANSWER", "Lookup", "NotifierIdentities", "lookup"]

MAX_ANSWER = 64 * 1024
"""Bytes of the notifier's answer read at most: ten matches are well under 2 KB."""
WHO = "the notifier"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SOURCES = ("audit", "admission")
log = logging.getLogger("driftguard.analysis.identity")


@dataclass(frozen=True)
class Lookup:
    """What the identity lookup gave one gate evaluation."""

    users: dict[int, str] = field(default_factory=dict)
    """Index in the asked changes -> the person whose record matched."""
    asked: frozenset[int] = frozenset()
    """Indexes of the changes asked about (human, with a managedFields actor)."""
    error: str = ""
    """Why no identity is available (the lookup failed); empty when the notifier answered."""

    @property
    def failed(self) -> bool:
        return bool(self.error)

    def observed(self) -> dict[str, Any]:
        out: dict[str, Any] = {"lookup": "failed" if self.failed else "ok", "matched": len(self.users)}
        if self.failed:
            out["error"] = self.error
        return out


class NotifierIdentities:
    """The notifier's ``POST /v1/identities/match`` with its read token, one bounded attempt."""

    def __init__(self, url: str, *, token: str, timeout: float, ca_file: str = "") -> None:
        import requests

        self.url = url.rstrip("/") + "/v1/identities/match"
        self.timeout = timeout
        self.verify: bool | str = ca_file or True
        self._session = requests.Session()
        self._session.headers["Accept"] = "application/json"
        self._session.headers["Authorization"] = f"Bearer {token}"
        self._session.max_redirects = 0  # a redirect is an answer we did not ask for: the lookup fails

    def match(self, writes: Sequence[Mapping[str, Any]], *, deadline: float | None) -> list[str | None]:
        """The person who made each write, in order (None: no record matched); UpstreamError otherwise."""
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
            max_body=MAX_ANSWER,
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
        return [_user(m, n) for n, m in enumerate(matches)]


def _user(match: Any, n: int) -> str | None:
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
    return user


def _live_meta(items: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str, str], tuple[str, str]]:
    """(group, kind, namespace, name) -> the live object's (uid, resourceVersion), from the parsed items."""
    out: dict[tuple[str, str, str, str], tuple[str, str]] = {}
    for item in items:
        live = item.get("liveState")
        meta = live.get("metadata") if isinstance(live, dict) else None
        if not isinstance(meta, dict):
            continue
        group, kind, namespace, name = (
            str(item.get(k) or "") for k in ("group", "kind", "namespace", "name")
        )
        uid, rv = meta.get("uid"), meta.get("resourceVersion")
        out[(group, kind, namespace, name)] = (
            uid if isinstance(uid, str) else "",
            rv if isinstance(rv, str) else "",
        )
    return out


def lookup(
    changes: Sequence[Classified],
    items: Iterable[Mapping[str, Any]],
    client: NotifierIdentities,
    *,
    deadline: float | None,
) -> Lookup:
    """Ask the notifier who made the human ``changes``; any failure is a :class:`Lookup` with an error, never raised."""
    live = _live_meta(items)
    asked: list[int] = []
    writes: list[dict[str, Any]] = []
    index: dict[tuple[Any, ...], int] = {}
    for n, c in enumerate(changes):
        if c.cls != HUMAN or c.actor is None:
            continue
        k = c.resource
        uid, rv = live.get((k.group, k.kind, k.namespace, k.name), ("", ""))
        w = {
            "group": k.group,
            "kind": k.kind,
            "namespace": k.namespace,
            "name": k.name,
            "uid": uid,
            "resourceVersion": rv,
            "manager": c.actor.manager,
            "time": c.actor.time,
        }
        key = tuple(w.values())
        if key not in index:  # several fields of one write are one question
            index[key] = len(writes)
            writes.append(w)
        asked.append(n)
    if not writes:
        return Lookup()
    try:
        people = client.match(writes, deadline=deadline)
    except UpstreamError as exc:
        log.warning("identity lookup failed, the gate names the field manager: %s", exc)
        return Lookup(asked=frozenset(asked), error=str(exc))
    except Exception as exc:  # an enrichment: whatever went wrong, the verdict stands without it
        log.exception("identity lookup failed unexpectedly")
        return Lookup(asked=frozenset(asked), error=f"the identity lookup failed ({type(exc).__name__})")
    users: dict[int, str] = {}
    for n in asked:
        c = changes[n]
        assert c.actor is not None
        k = c.resource
        uid, rv = live.get((k.group, k.kind, k.namespace, k.name), ("", ""))
        person = people[index[(k.group, k.kind, k.namespace, k.name, uid, rv, c.actor.manager, c.actor.time)]]
        if person:
            users[n] = person
    return Lookup(users=users, asked=frozenset(asked))

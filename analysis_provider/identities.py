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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from driftguard.drift import HUMAN, Classified
from driftguard.errors import UpstreamError
from driftguard.whois import IdentityMatch

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
    """The notifier's ``POST /v1/identities/match`` with its read token, one bounded attempt.

    The request and the answer's checks are driftguard/whois.py's (the PR check asks the same
    endpoint); the gate only needs the person's name.
    """

    def __init__(self, url: str, *, token: str, timeout: float, ca_file: str = "") -> None:
        self._client = IdentityMatch(
            url, token=token, timeout=timeout, ca_file=ca_file, max_answer=MAX_ANSWER
        )
        self.url = self._client.url

    def match(self, writes: Sequence[Mapping[str, Any]], *, deadline: float | None) -> list[str | None]:
        """The person who made each write, in order (None: no record matched); UpstreamError otherwise."""
        return [p.user if p is not None else None for p in self._client.match(writes, deadline=deadline)]


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

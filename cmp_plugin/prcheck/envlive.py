"""``driftguard-cmp diff --live``: the live changes in the cluster that merging this PR would overwrite.

For each environment the Application's live objects come from Argo CD
(``GET /api/v1/applications/{name}/managed-resources``, driftguard/argocd.py, configured from
``DRIFTGUARD_ARGOCD_URL`` and ``DRIFTGUARD_ARGOCD_TOKEN``/``_TOKEN_FILE`` exactly as the notifier
reads them). A live field is a hotfix or a drift when the drift engine classes it ``human`` against
the base render (changed outside Git, with the Application's own ignoreDifferences applied and
Argo CD's three-way decision: driftguard/drift.py). The merge overwrites it when the same field,
compared with the head render, is still one Argo CD's sync would write (``human`` or
``pending-sync``): the head render sets another value, or drops the field. A head that writes the
live value into Git keeps the hotfix and is not listed; a resource the head no longer renders
takes its live changes with it and is listed as pruned.

Who and when: the field manager and time from ``managedFields``, and the person when the
notifier's identity match is configured (``DRIFTGUARD_CMP_NOTIFIER_URL`` with
``DRIFTGUARD_CMP_NOTIFIER_READ_TOKEN`` or ``DRIFTGUARD_CMP_NOTIFIER_READ_TOKEN_FILE``,
``POST /v1/identities/match``); a failing lookup leaves the manager and says so, never the verdict.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from cmp_plugin.prcheck.envdiff import EnvDiff
from driftguard.argocd import ArgoCDClient, ArgoCDSettings
from driftguard.drift import HUMAN, PENDING_SYNC, Classified, DriftEngine
from driftguard.env import secret
from driftguard.errors import ConfigError, DriftguardError, NotFound
from driftguard.identity import who
from driftguard.ignore import IgnoreRules, rules_from_application
from driftguard.manifests import ResourceKey
from driftguard.readable import readable_path, short
from driftguard.redact import Redactor, scrub_text
from driftguard.whois import IdentityMatch

__all__ = ["PRUNED", "LiveChecker", "LiveDiff", "Overwrite"]

# a DNS-1123 subdomain: what Kubernetes accepts as an Application's name and namespace
_OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
PRUNED = "(pruned)"
"""What the head render holds for a field of a resource it no longer renders."""
WRITTEN_BY_SYNC = frozenset({HUMAN, PENDING_SYNC})
"""Classes of a field Argo CD's sync writes (a quiet class is one it leaves alone)."""


@dataclass(frozen=True)
class Overwrite:
    """One live field the merge overwrites: its values in the cluster, at base and at head, and who set it."""

    key: ResourceKey
    path: str
    pointer: str
    live: str
    base: str
    head: str
    manager: str = ""
    time: str | None = None
    user: str = ""
    matched: bool | None = None
    """None: no identity lookup ran; False: it ran and no record matched."""

    def who(self, now: float | None = None) -> str:
        """``alice@example.com via kubectl-patch, 14:02:07 (3 h ago)`` (the alerts' actor line), or ""."""
        if not (self.manager or self.user):
            return ""
        return who(manager=self.manager, time=self.time, user=self.user, matched=self.matched, now=now)

    def to_json(self, now: float | None = None) -> dict[str, Any]:
        return {
            "resource": str(self.key),
            "group": self.key.group,
            "kind": self.key.kind,
            "namespace": self.key.namespace,
            "name": self.key.name,
            "path": self.path,
            "pointer": self.pointer,
            "live": self.live,
            "base": self.base,
            "head": self.head,
            "manager": self.manager,
            "time": self.time,
            "user": self.user,
            "who": self.who(now),
        }


@dataclass
class LiveDiff:
    """What ``--live`` found for one environment."""

    overwrites: list[Overwrite] = field(default_factory=list)
    compared: int = 0
    """Resources rendered at base that have a live object."""
    absent: bool = False
    """Argo CD has no such Application (404): nothing of it runs yet."""
    error: str = ""
    """Argo CD could not be read or the Application's rules not applied: nothing can be said."""
    identity: str = ""
    """Why the person behind each write is not known (the lookup failed); "" otherwise."""


class LiveChecker:
    """Reads each environment's live objects and finds the overwrites (envdiff.LiveCheck)."""

    def __init__(self, client: ArgoCDClient, *, redactor: Redactor, identities: IdentityMatch | None = None):
        self.client = client
        self.redactor = redactor
        self.identities = identities

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, redactor: Redactor) -> LiveChecker:
        """The Argo CD client as the notifier configures it, and the identity match when configured."""
        client = ArgoCDClient(ArgoCDSettings.from_env(env))
        url = env.get("DRIFTGUARD_CMP_NOTIFIER_URL", "").strip()
        identities = None
        if url:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError("DRIFTGUARD_CMP_NOTIFIER_URL", "must be an http(s) URL with a host")
            if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
                raise ConfigError(
                    "DRIFTGUARD_CMP_NOTIFIER_URL",
                    "must be a base URL without credentials, query or fragment (the token has its own setting)",
                )
            token = secret(env, "DRIFTGUARD_CMP_NOTIFIER_READ_TOKEN")
            if not token:
                raise ConfigError(
                    "DRIFTGUARD_CMP_NOTIFIER_READ_TOKEN",
                    "is required with DRIFTGUARD_CMP_NOTIFIER_URL (or DRIFTGUARD_CMP_NOTIFIER_READ_TOKEN_FILE):"
                    " the notifier's read token",
                )
            raw = env.get("DRIFTGUARD_CMP_NOTIFIER_TIMEOUT", "") or "5"
            try:
                timeout = float(raw)
            except ValueError:
                timeout = -1.0
            if not timeout > 0:
                raise ConfigError(
                    "DRIFTGUARD_CMP_NOTIFIER_TIMEOUT", f"must be a positive number, got {raw!r}"
                )
            identities = IdentityMatch(url, token=token, timeout=timeout)
        return cls(client, redactor=redactor, identities=identities)

    def check(
        self, d: EnvDiff, base: dict[ResourceKey, dict[str, Any]], head: dict[ResourceKey, dict[str, Any]]
    ) -> None:
        if d.head is None or d.base is None:
            return  # a new Application runs nothing yet; a deleted one is reported by what it prunes
        env = d.head
        for what, value in (("Application name", env.name), ("Application namespace", env.app_namespace)):
            if value and (len(value) > 253 or not _OBJECT_NAME.fullmatch(value)):
                # the name goes into the API path: a PR's name like "other/managed-resources?" must
                # never make the check read (and print) another Application's live objects
                d.live = LiveDiff(error=f"the {what} is not a Kubernetes object name; Argo CD was not asked")
                return
        try:
            items = self.client.managed_resources(env.name, env.app_namespace)
        except NotFound:
            d.live = LiveDiff(absent=True)
            return
        except DriftguardError as exc:
            d.live = LiveDiff(error=scrub_text(str(exc).splitlines()[0]))
            return
        try:
            d.live = self._compare(env.name, env.compare, items, base, head)
        except DriftguardError as exc:
            d.live = LiveDiff(error=scrub_text(str(exc).splitlines()[0]))
            return
        self._attribute(d.live, items)

    def _compare(
        self,
        name: str,
        compare: str,
        items: list[Any],
        base: dict[ResourceKey, dict[str, Any]],
        head: dict[ResourceKey, dict[str, Any]],
    ) -> LiveDiff:
        spec = json.loads(compare) if compare else {}
        app = {"metadata": {"name": name}, "spec": {"ignoreDifferences": spec.get("ignoreDifferences")}}
        options = spec.get("syncOptions") or []
        ssa = isinstance(options, list) and "ServerSideApply=true" in options
        rules = IgnoreRules(rules_from_application(app))
        out = LiveDiff()
        try:
            engine = DriftEngine(rules, redactor=self.redactor, server_side_apply=ssa)
            for item in items:
                live = _state(item.get("liveState"))
                key = ResourceKey(*(str(item.get(k) or "") for k in ("group", "kind", "namespace", "name")))
                if item.get("hook") or live is None or key not in base:
                    continue
                out.compared += 1
                hot = {
                    c.change.stable_path: c
                    for c in engine.resource(key, base[key], live, live_raw=live).changes
                    if c.cls == HUMAN
                }
                if not hot:
                    continue
                if key not in head:
                    out.overwrites += [_overwrite(c, head=PRUNED) for c in hot.values()]
                    continue
                for c in engine.resource(key, head[key], live, live_raw=live).changes:
                    was = hot.get(c.change.stable_path)
                    if was is not None and c.cls in WRITTEN_BY_SYNC:
                        out.overwrites.append(_overwrite(was, head=_shown(c.change.old)))
        finally:
            rules.close()
        return out

    def _attribute(self, live: LiveDiff, items: list[Any]) -> None:
        """The person behind each overwritten write, asked of the notifier in one question."""
        if self.identities is None or not live.overwrites:
            return
        meta: dict[ResourceKey, tuple[str, str]] = {}
        for item in items:
            obj = _state(item.get("liveState"))
            m = obj.get("metadata") if obj else None
            if isinstance(m, dict):
                key = ResourceKey(*(str(item.get(k) or "") for k in ("group", "kind", "namespace", "name")))
                meta[key] = (str(m.get("uid") or ""), str(m.get("resourceVersion") or ""))
        writes: list[dict[str, Any]] = []
        index: dict[tuple[Any, ...], int] = {}
        for o in live.overwrites:
            w = _write(o, meta)
            if w is not None and tuple(w.values()) not in index:  # fields of one write: one question
                index[tuple(w.values())] = len(writes)
                writes.append(w)
        if not writes:
            return
        try:
            people = self.identities.match(writes, deadline=time.monotonic() + self.identities.timeout * 2)
        except DriftguardError as exc:
            live.identity = f"the identity lookup failed: {scrub_text(str(exc).splitlines()[0])}"
            return
        named = []
        for o in live.overwrites:
            w = _write(o, meta)
            person = people[index[tuple(w.values())]] if w is not None else None
            named.append(
                o if w is None else replace(o, user=person.user if person else "", matched=person is not None)
            )
        live.overwrites = named


def _write(o: Overwrite, meta: dict[ResourceKey, tuple[str, str]]) -> dict[str, Any] | None:
    """The write behind an overwritten field as the identity match takes it, or None without a manager."""
    if not o.manager:
        return None
    uid, rv = meta.get(o.key, ("", ""))
    return {
        "group": o.key.group,
        "kind": o.key.kind,
        "namespace": o.key.namespace,
        "name": o.key.name,
        "uid": uid,
        "resourceVersion": rv,
        "manager": o.manager,
        "time": o.time,
    }


def _overwrite(c: Classified, *, head: str) -> Overwrite:
    """An overwrite from the base comparison's change (old: the base render's value, new: the live one)."""
    change = c.change
    return Overwrite(
        key=c.resource,
        path=readable_path(change.path, change.segments) or "(the whole object)",
        pointer=change.path,
        live=_shown(change.new),
        base=_shown(change.old),
        head=head,
        manager=c.actor.manager if c.actor else "",
        time=c.actor.time if c.actor else None,
    )


def _shown(value: Any) -> str:
    return short(value) if value != "" else '""'


def _state(raw: Any) -> dict[str, Any] | None:
    """A managed-resources state: a JSON string ("null" when absent) or, from a saved answer, an object."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or raw in ("", "null"):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None

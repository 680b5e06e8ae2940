"""Classify every difference between Git and the cluster, and attribute it.

Decision table, applied to each field change that survives Argo CD's normalizations, in order
(``owners`` are the live object's ``managedFields`` entries that own the changed path; ``add``
means live has a field Git does not declare):

====  =============================================  ===================  ===========================
 #    condition                                      class                actor
====  =============================================  ===================  ===========================
 1    an ignoreDifferences jsonPointer/jq rule       ``ignored``          -
      removes it (app or argocd-cm)
 2    an owner is in the rule's                      ``ignored``          that manager
      ``managedFieldsManagers``
 3    an owner is a known controller (HPA/KCM,       ``controller``       that controller
      VPA, KEDA, configured list)
 4    owned by Argo CD's manager only, ``add``       ``admission-default``  Argo CD's entry
 5    owned by Argo CD's manager only, Git declares  ``pending-sync``     Argo CD's entry
      it (replace/remove): Git moved ahead
 6    owned by any other manager                     ``human``            the newest such entry
      (kubectl-patch, kubectl-edit, dashboards ...)
 7    nobody owns it, last-applied present:          three-way on last-applied:
      ``add`` and not in last-applied                ``admission-default``
      ``add`` and in last-applied (Git dropped it)   ``pending-sync``
      live == last-applied != Git                    ``pending-sync``
      otherwise                                      ``human``            newest toucher after Argo
 8    nobody owns it, managedFields present:
      ``add`` (API-server defaults are unowned)      ``admission-default``
      removed/replaced, touched after Argo CD        ``human``/``controller``  that toucher
      removed/replaced, untouched since Argo CD      ``pending-sync``
 9    no managedFields, no last-applied (two-way):
      ``add``                                        ``admission-default``
      otherwise                                      ``human``            unknown
====  =============================================  ===================  ===========================

Whole resources: desired without live is ``missing``; live without desired is ``prune-candidate``.
Alerting classes are ``human``, ``missing`` and ``prune-candidate``.

Before diffing, Argo CD's normalizations are applied: ``status`` and server-set metadata are
ignored, ``null`` in Git means "not set", Secret ``stringData`` is folded into ``data``, RBAC rule
lists treat nil and empty alike, Endpoints subsets are compared sorted, resource quantities by value.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from driftguard.diff import FieldChange, ListSeg, Segment, diff_objects, pointer
from driftguard.ignore import IgnoreRules
from driftguard.manifests import ResourceKey, group_of, resource_key
from driftguard.redact import Redactor

__all__ = [
    "ADMISSION_DEFAULT",
    "ALERTING",
    "CLASSES",
    "CONTROLLER",
    "HUMAN",
    "IGNORED",
    "MISSING",
    "PENDING_SYNC",
    "PRUNE_CANDIDATE",
    "Actor",
    "Classified",
    "DriftEngine",
    "Policy",
    "ResourceDrift",
]

HUMAN = "human"
CONTROLLER = "controller"
ADMISSION_DEFAULT = "admission-default"
PENDING_SYNC = "pending-sync"
IGNORED = "ignored"
MISSING = "missing"
PRUNE_CANDIDATE = "prune-candidate"
CLASSES = (HUMAN, MISSING, PRUNE_CANDIDATE, PENDING_SYNC, CONTROLLER, ADMISSION_DEFAULT, IGNORED)
ALERTING = frozenset({HUMAN, MISSING, PRUNE_CANDIDATE})

DEFAULT_CONTROLLERS = frozenset(
    {
        "kube-controller-manager",  # HPA, Deployment controller, ...
        "kube-scheduler",
        "kubelet",
        "horizontal-pod-autoscaler",
        "vpa-recommender",
        "vpa-updater",
        "vpa-admission-controller",
        "keda-operator",
        "cluster-autoscaler",
        "karpenter",
    }
)
ARGOCD_MANAGERS = frozenset({"argocd-controller", "argocd-application-controller"})
_SERVER_METADATA = ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_RULE_LISTS = ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs")


@dataclass(frozen=True)
class Policy:
    """Which field managers are controllers and which are Argo CD itself."""

    controllers: frozenset[str] = DEFAULT_CONTROLLERS
    """Managers whose writes are legitimate runtime mutations (never alerted)."""
    argocd_managers: frozenset[str] = ARGOCD_MANAGERS
    """Argo CD's own field managers."""


@dataclass(frozen=True)
class Actor:
    """Who last wrote a field, from a managedFields entry."""

    manager: str
    operation: str = ""
    time: str | None = None
    user: str = ""
    """The person, when an identity record (audit or admission) matched this write (driftguard/identity.py)."""
    source: str = ""
    """Where ``user`` came from: ``audit`` or ``admission``."""
    matched: bool | None = None
    """None: no identity lookup ran; False: one ran and no record matched; True: ``user`` is set."""


@dataclass(frozen=True)
class Classified:
    """A field change with its class, the actor when known, and why it got that class."""

    resource: ResourceKey
    change: FieldChange
    cls: str
    actor: Actor | None = None
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "resource": {
                "group": self.resource.group,
                "kind": self.resource.kind,
                "namespace": self.resource.namespace,
                "name": self.resource.name,
            },
            "path": self.change.path,
            "op": self.change.op,
            "old": self.change.old,
            "new": self.change.new,
            "class": self.cls,
            "reason": self.reason,
        }
        if self.actor is not None:
            out["actor"] = {
                "manager": self.actor.manager,
                "operation": self.actor.operation,
                "time": self.actor.time,
            }
            if self.actor.matched is not None:  # an identity lookup ran (notifier/identity.py)
                out["actor"].update(
                    user=self.actor.user, source=self.actor.source, matched=self.actor.matched
                )
        return out


@dataclass
class ResourceDrift:
    """One resource's status (synced, modified, missing, prune-candidate) and its classified changes."""

    key: ResourceKey
    status: str
    changes: list[Classified] = field(default_factory=list)

    def by_class(self, cls: str) -> list[Classified]:
        return [c for c in self.changes if c.cls == cls]

    @property
    def alerting(self) -> list[Classified]:
        return [c for c in self.changes if c.cls in ALERTING]


@dataclass(frozen=True)
class _Entry:
    manager: str
    operation: str
    time: str
    fields: dict[str, Any]

    @property
    def actor(self) -> Actor:
        return Actor(self.manager, self.operation, self.time or None)


class DriftEngine:
    """Diff, ignore, classify, attribute and redact, for one Application's rules."""

    def __init__(
        self,
        rules: IgnoreRules | None = None,
        *,
        policy: Policy | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.rules = rules or IgnoreRules()
        self.policy = policy or Policy()
        self.redactor = redactor or Redactor()

    # --- inputs ----------------------------------------------------------------------------------

    def managed_resources(self, items: Iterable[Mapping[str, Any]]) -> list[ResourceDrift]:
        """Analyse Argo CD's managed-resources items (states as JSON strings, ``"null"`` when absent).

        Compares predictedLiveState against normalizedLiveState (what the Argo CD UI shows) when
        present, else targetState against liveState; ownership comes from liveState.
        """
        out = []
        for item in items:
            if item.get("hook"):
                continue
            target = _state(item, "targetState")
            live_raw = _state(item, "liveState")
            desired = _state(item, "predictedLiveState") or target
            live = _state(item, "normalizedLiveState") or live_raw
            if target is None and desired is not None and live_raw is None:
                target = desired
            key = ResourceKey(
                str(item.get("group") or ""),
                str(item.get("kind") or ""),
                str(item.get("namespace") or ""),
                str(item.get("name") or ""),
            )
            if target is None:
                desired = None
            out.append(self.resource(key, desired, live, live_raw=live_raw))
        return out

    def pairs(
        self,
        desired: Iterable[dict[str, Any]],
        live: Iterable[dict[str, Any]],
        *,
        default_namespace: str = "",
    ) -> list[ResourceDrift]:
        """Pair two sets of manifests by ResourceKey and analyse each pair."""
        want = {resource_key(o, default_namespace=default_namespace): o for o in desired}
        have = {resource_key(o, default_namespace=default_namespace): o for o in live}
        return [self.resource(k, want.get(k), have.get(k)) for k in sorted(want.keys() | have.keys())]

    # --- one resource ----------------------------------------------------------------------------

    def resource(
        self,
        key: ResourceKey,
        desired: dict[str, Any] | None,
        live: dict[str, Any] | None,
        *,
        live_raw: dict[str, Any] | None = None,
    ) -> ResourceDrift:
        """The drift of one resource: desired (Git) against live (cluster)."""
        if desired is None and live is None:
            return ResourceDrift(key, "synced")
        if live is None:
            whole = FieldChange("", "remove", self.redactor.value(desired, kind=key.kind), None)
            return ResourceDrift(
                key, MISSING, [Classified(key, whole, MISSING, reason="in Git, not in the cluster")]
            )
        if desired is None:
            whole = FieldChange("", "add", None, self.redactor.value(live, kind=key.kind))
            reason = "in the cluster, not in Git: Argo CD would prune it"
            return ResourceDrift(
                key, PRUNE_CANDIDATE, [Classified(key, whole, PRUNE_CANDIDATE, reason=reason)]
            )
        live_raw = live_raw or live
        d = _normalize(desired, key)
        lv = _normalize(live, key)
        raw = diff_objects(d, lv)
        if not raw:
            return ResourceDrift(key, "synced")
        out: list[Classified] = []
        rules = self.rules.matching(key.group, key.kind, key.name, key.namespace)
        changes = raw
        if any(r.json_pointers or r.jq_path_expressions for r in rules):
            kept = diff_objects(self.rules.normalize(d, rules), self.rules.normalize(lv, rules))
            kept_paths = {c.stable_path for c in kept}
            for c in raw:
                if c.stable_path not in kept_paths:
                    out.append(Classified(key, c, IGNORED, reason=_rule_reason(rules)))
            changes = kept
        if changes:
            changes = _split_added_maps(changes)
            trusted = self.rules.trusted_managers(key.group, key.kind, key.name, key.namespace)
            ctx = _Context(live_raw, self.policy)
            out.extend(self._classify(key, c, ctx, trusted) for c in changes)
        out = [
            Classified(
                c.resource,
                self.redactor.change(c.change, kind=key.kind, group=key.group),
                c.cls,
                c.actor,
                c.reason,
            )
            for c in out
        ]
        out.sort(key=lambda c: (CLASSES.index(c.cls), c.change.path))
        status = (
            "modified"
            if any(c.cls not in (IGNORED, CONTROLLER, ADMISSION_DEFAULT) for c in out)
            else "synced"
        )
        return ResourceDrift(key, status, out)

    def _classify(
        self, key: ResourceKey, change: FieldChange, ctx: _Context, trusted: dict[str, str]
    ) -> Classified:
        policy = self.policy
        owners = ctx.owners(change.segments) if change.op != "remove" else []
        for o in owners:
            if o.manager in trusted:
                return Classified(
                    key, change, IGNORED, o.actor, f"managedFieldsManagers {o.manager} ({trusted[o.manager]})"
                )
        if owners:
            ctrl = [o for o in owners if o.manager in policy.controllers]
            if ctrl:
                return Classified(key, change, CONTROLLER, _newest(ctrl).actor, "written by a controller")
            others = [o for o in owners if o.manager not in policy.argocd_managers]
            if not others:
                actor = _newest(owners).actor
                if change.op == "add":
                    return Classified(
                        key, change, ADMISSION_DEFAULT, actor, "not in Git; set when Argo CD applied it"
                    )
                return Classified(
                    key, change, PENDING_SYNC, actor, "Git changed; the cluster holds what Argo CD applied"
                )
            return Classified(key, change, HUMAN, _newest(others).actor, "changed outside Git")
        if ctx.last_applied is not None:
            in_la, la_value = _lookup(ctx.last_applied, change.segments)
            if change.op == "add":
                if in_la:
                    return Classified(
                        key, change, PENDING_SYNC, None, "removed from Git; still in the cluster"
                    )
                return Classified(key, change, ADMISSION_DEFAULT, None, "neither in Git nor last applied")
            if change.op == "replace" and in_la and la_value == change.new:
                return Classified(
                    key, change, PENDING_SYNC, None, "Git changed; the cluster holds the last applied value"
                )
            if change.op == "remove" and not in_la:
                return Classified(key, change, PENDING_SYNC, None, "added to Git; not applied yet")
            toucher = ctx.toucher()
            if toucher is not None and toucher.manager in policy.controllers:
                return Classified(key, change, CONTROLLER, toucher.actor, "written by a controller")
            return Classified(
                key, change, HUMAN, toucher.actor if toucher else None, "differs from what was last applied"
            )
        if ctx.entries:
            if change.op == "add":
                return Classified(
                    key, change, ADMISSION_DEFAULT, None, "not in Git; no manager owns it (a server default)"
                )
            toucher = ctx.toucher()
            if toucher is None:
                return Classified(
                    key, change, PENDING_SYNC, None, "nobody touched it since Argo CD applied it"
                )
            if toucher.manager in policy.controllers:
                return Classified(key, change, CONTROLLER, toucher.actor, "written by a controller")
            return Classified(key, change, HUMAN, toucher.actor, "changed outside Git")
        if change.op == "add":
            return Classified(key, change, ADMISSION_DEFAULT, None, "not in Git (two-way comparison)")
        return Classified(key, change, HUMAN, None, "differs from Git (no managedFields to attribute it)")


def _split_added_maps(changes: list[FieldChange]) -> list[FieldChange]:
    """An added map becomes one add per leaf, so each key is attributed to its own field manager."""
    out: list[FieldChange] = []
    stack = list(reversed(changes))
    while stack:
        c = stack.pop()
        if c.op == "add" and isinstance(c.new, dict) and c.new:
            for k in reversed(list(c.new)):
                segs = (*c.segments, k)
                stack.append(FieldChange(pointer(segs), "add", None, c.new[k], segs))
        else:
            out.append(c)
    return out


class _Context:
    """The live object's managedFields and last-applied annotation, parsed lazily."""

    def __init__(self, live: Mapping[str, Any], policy: Policy) -> None:
        meta = live.get("metadata") or {}
        self.policy = policy
        self.entries: list[_Entry] = []
        for e in meta.get("managedFields") or []:
            if (
                isinstance(e, dict)
                and e.get("subresource") != "status"
                and isinstance(e.get("fieldsV1"), dict)
            ):
                self.entries.append(
                    _Entry(
                        str(e.get("manager", "")),
                        str(e.get("operation", "")),
                        str(e.get("time") or ""),
                        e["fieldsV1"],
                    )
                )
        self.last_applied: Any = None
        raw = (meta.get("annotations") or {}).get(_LAST_APPLIED)
        if isinstance(raw, str):
            try:
                self.last_applied = json.loads(raw)
            except ValueError:
                self.last_applied = None

    def owners(self, segs: tuple[Segment, ...]) -> list[_Entry]:
        return [e for e in self.entries if _owns(e.fields, segs)]

    def toucher(self) -> _Entry | None:
        """The newest non-Argo entry written after Argo CD's newest entry."""
        argo = [e.time for e in self.entries if e.manager in self.policy.argocd_managers]
        since = max(argo) if argo else ""
        later = [e for e in self.entries if e.manager not in self.policy.argocd_managers and e.time > since]
        return _newest(later) if later else None


def _newest(entries: list[_Entry]) -> _Entry:
    return max(entries, key=lambda e: e.time)


def _owns(tree: dict[str, Any], segs: tuple[Segment, ...]) -> bool:
    """Whether a FieldsV1 tree owns ``segs`` (or an ancestor of it as a leaf, or part of it)."""
    if not tree:
        return False
    node = tree
    for seg in segs:
        if not node:
            return True  # a leaf owns everything below it (atomic field)
        child = _match_item(node, seg) if isinstance(seg, ListSeg) else node.get(f"f:{seg}")
        if child is None:
            return False
        node = child
    return True


def _match_item(node: dict[str, Any], seg: ListSeg) -> Any:
    item = seg.item
    for name, child in node.items():
        tag = name[:2]
        if tag == "k:":
            want = _parse_key(name)
            if (
                isinstance(item, dict)
                and isinstance(want, dict)
                and all(item.get(k) == v for k, v in want.items())
            ):
                return child
        elif tag == "v:":
            if _parse_key(name) == item:
                return child
        elif tag == "i:" and name[2:] == str(seg.index):
            return child
    return None


def _parse_key(name: str) -> Any:
    try:
        return _json_cached(name[2:])
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def _json_cached(text: str) -> Any:
    return json.loads(text)  # shared between callers: never mutated


def _lookup(obj: Any, segs: tuple[Segment, ...]) -> tuple[bool, Any]:
    """Find ``segs`` in another object (last-applied), keyed list items by key, else by index."""
    node = obj
    for seg in segs:
        if isinstance(seg, ListSeg):
            if not isinstance(node, list):
                return False, None
            if seg.key is not None:
                found = [i for i in node if isinstance(i, dict) and all(i.get(k) == v for k, v in seg.key)]
                if not found:
                    return False, None
                node = found[0]
            elif seg.index < len(node):
                node = node[seg.index]
            else:
                return False, None
        else:
            if not isinstance(node, dict) or seg not in node:
                return False, None
            node = node[seg]
    return True, node


def _state(item: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    raw = item.get(name)
    if raw is None or raw == "" or raw == "null":
        return None
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _rule_reason(rules: list[Any]) -> str:
    origins = sorted({r.origin for r in rules if r.json_pointers or r.jq_path_expressions})
    return "ignoreDifferences: " + ", ".join(origins)


def _normalize(obj: dict[str, Any], key: ResourceKey) -> dict[str, Any]:
    """Argo CD's comparison normalizations; copies only what it changes."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k not in _SERVER_METADATA}
        ann = meta.get("annotations")
        if isinstance(ann, dict) and _LAST_APPLIED in ann:
            ann = {k: v for k, v in ann.items() if k != _LAST_APPLIED}
            if ann:
                meta["annotations"] = ann
            else:
                del meta["annotations"]
        out["metadata"] = meta
    if key.kind == "Secret" and key.group == "" and isinstance(out.get("stringData"), dict):
        data = dict(out.get("data") or {})
        for k, v in out.pop("stringData").items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        out["data"] = data
    if (
        key.kind in ("Role", "ClusterRole")
        and group_of(str(out.get("apiVersion", ""))) == "rbac.authorization.k8s.io"
    ):
        rules = out.get("rules") or []
        out["rules"] = [
            {k: v for k, v in r.items() if not (k in _RULE_LISTS and not v)}
            for r in rules
            if isinstance(r, dict)
        ]
        if not out["rules"]:
            del out["rules"]
    if key.kind == "Endpoints" and key.group == "" and isinstance(out.get("subsets"), list):
        out["subsets"] = [_sorted_subset(s) for s in out["subsets"]]
    return out


def _sorted_subset(subset: Any) -> Any:
    if not isinstance(subset, dict):
        return subset
    out = dict(subset)
    for name in ("addresses", "notReadyAddresses"):
        if isinstance(out.get(name), list):
            out[name] = sorted(out[name], key=lambda a: json.dumps(a, sort_keys=True))
    if isinstance(out.get("ports"), list):
        out["ports"] = sorted(out["ports"], key=lambda p: json.dumps(p, sort_keys=True))
    return out

"""Classify every difference between Git and the cluster, and attribute it.

Decision table, applied to each field change that survives Argo CD's normalizations and its
three-way decision, in order
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

Whole resources: desired without live is ``missing``; live without desired is ``prune-candidate``
(unless a hook or ``IgnoreExtraneous``: ``ignored``). Alerting classes are ``human``, ``missing``
and ``prune-candidate``.

The order of the decision follows Argo CD (docs/drift-engine.md lists each rule and its source):
pair as the controller does (``pairs``), apply Argo's normalizations (driftguard/normalize.py) and
ignoreDifferences, keep only the changes Argo's three-way merge would make (``_argo_modified``),
and only then classify. A change Argo does not count gets a quiet class (``ignored``,
``controller`` or ``admission-default``), so driftguard never alerts where Argo CD shows Synced.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from driftguard.diff import FieldChange, ListSeg, Segment, diff_objects, pointer
from driftguard.ignore import IgnoreRules
from driftguard.k8s_fields import MERGE_LISTS
from driftguard.manifests import CLUSTER_SCOPED, ResourceKey, cluster_scoped_kinds, group_of, resource_key
from driftguard.normalize import BUILTIN_GROUPS, LAST_APPLIED, normalize, remarshal_view
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
_LAST_APPLIED = LAST_APPLIED
_HOOK = "argocd.argoproj.io/hook"
_HELM_HOOK = "helm.sh/hook"
_COMPARE_OPTIONS = "argocd.argoproj.io/compare-options"
_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
_SSA_MANAGER = "argocd-controller"  # argo-cd common/common.go ArgoCDSSAManager
# gitops-engine pkg/sync/common/types.go NewHookType, hook/helm/type.go NewType, and argo-cd
# controller/hook.go (PreDelete/PostDelete)
_HOOK_TYPES = frozenset({"PreSync", "Sync", "PostSync", "SyncFail", "Skip", "PreDelete", "PostDelete"})
_HELM_HOOK_TYPES = frozenset(
    {"pre-install", "pre-upgrade", "post-upgrade", "post-install", "pre-delete", "post-delete"}
)


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
        server_side_apply: bool = False,
    ) -> None:
        self.rules = rules or IgnoreRules()
        self.policy = policy or Policy()
        self.redactor = redactor or Redactor()
        self.server_side_apply = server_side_apply
        """The Application syncs with ``ServerSideApply=true``: Argo CD compares the way
        server-side apply merges (controller/state.go WithStructuredMergeDiff)."""

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
            has_predicted = _state(item, "predictedLiveState") is not None
            out.append(self.resource(key, desired, live, live_raw=live_raw, predicted=has_predicted))
        return out

    def pairs(
        self,
        desired: Iterable[dict[str, Any]],
        live: Iterable[dict[str, Any]],
        *,
        default_namespace: str = "",
    ) -> list[ResourceDrift]:
        """Pair Git's manifests with the cluster's the way Argo CD does, and analyse each pair.

        gitops-engine pkg/sync/reconcile.go ``Reconcile`` and argo-cd controller/state.go
        ``NormalizeTargetObjects``: hooks are not compared; a namespaced object without a namespace
        takes ``default_namespace`` (the Application's destination); a cluster-scoped one loses any
        namespace Git gave it; a kind of unknown scope is looked up namespaced, then cluster-wide.
        Beyond Argo: with no destination namespace known, a Git object without a namespace pairs
        with the one live object of its group, kind and name (rather than two false alerts).
        """
        desired = [o for o in desired if isinstance(o, dict)]
        live = [o for o in live if isinstance(o, dict)]
        scoped = cluster_scoped_kinds([*desired, *live])
        have: dict[ResourceKey, dict[str, Any]] = {}
        for obj in live:
            have.setdefault(resource_key(obj, cluster_scoped=frozenset()), obj)
        # state.go NormalizeTargetObjects: one object per key, the last one wins (Argo warns
        # RepeatedResourceWarning); a nameless object is keyed generateName + its position
        targets: dict[ResourceKey, tuple[dict[str, Any], list[ResourceKey]]] = {}
        for i, obj in enumerate(desired):
            if _ignored_object(obj) or _is_hook(obj):
                continue  # reconcile.go splitHooks: hooks run, they are not compared
            group = group_of(str(obj.get("apiVersion", "")))
            kind = str(obj.get("kind", ""))
            meta = obj.get("metadata") or {}
            name = str(meta.get("name") or "")
            if not name and meta.get("generateName"):
                name = f"{meta['generateName']}{i}"
            ns = str(meta.get("namespace") or default_namespace)
            if (group, kind) in scoped:
                candidates = [ResourceKey(group, kind, "", name)]
            elif group in BUILTIN_GROUPS or (group, kind) in _KNOWN_NAMESPACED:
                candidates = [ResourceKey(group, kind, ns, name)]
            else:  # unknown scope: both, namespaced first (reconcile.go)
                candidates = [ResourceKey(group, kind, ns, name), ResourceKey(group, kind, "", name)]
            targets.pop(candidates[0], None)
            targets[candidates[0]] = (obj, candidates)
        out: list[tuple[ResourceKey, dict[str, Any] | None, dict[str, Any] | None]] = []
        for first, (obj, candidates) in targets.items():
            found = next((k for k in candidates if k in have), None)
            if found is None and not first.namespace and (first.group, first.kind) not in scoped:
                twins = [k for k in have if k[:2] == first[:2] and k.name == first.name]
                found = twins[0] if len(twins) == 1 else None
            if found is not None:
                out.append((found, obj, have.pop(found)))
            else:
                out.append((first, obj, None))
        out.extend((k, None, o) for k, o in have.items())
        return [self.resource(k, d, lv) for k, d, lv in sorted(out, key=lambda t: t[0])]

    # --- one resource ----------------------------------------------------------------------------

    def resource(
        self,
        key: ResourceKey,
        desired: dict[str, Any] | None,
        live: dict[str, Any] | None,
        *,
        live_raw: dict[str, Any] | None = None,
        predicted: bool = False,
    ) -> ResourceDrift:
        """The drift of one resource: desired (Git) against live (cluster).

        ``predicted``: ``desired`` is Argo CD's predictedLiveState, so Argo CD has already made its
        three-way decision and every difference left is one it counts.
        """
        if desired is None and live is None:
            return ResourceDrift(key, "synced")
        if live is None:
            whole = FieldChange("", "remove", self.redactor.value(desired, kind=key.kind), None)
            return ResourceDrift(
                key, MISSING, [Classified(key, whole, MISSING, reason="in Git, not in the cluster")]
            )
        if desired is None:
            whole = FieldChange("", "add", None, self.redactor.value(live, kind=key.kind))
            quiet = _unmanaged_reason(live)
            if quiet is not None:
                return ResourceDrift(key, "synced", [Classified(key, whole, IGNORED, reason=quiet)])
            reason = "in the cluster, not in Git: Argo CD would prune it"
            return ResourceDrift(
                key, PRUNE_CANDIDATE, [Classified(key, whole, PRUNE_CANDIDATE, reason=reason)]
            )
        live_raw = live_raw or live
        desired = _with_tracking(desired, live)
        options = self.rules.compare_options
        known = self.rules.known_types(key.group, key.kind)
        d = normalize(desired, key.group, key.kind, options=options, known_types=known)
        lv = normalize(live, key.group, key.kind, options=options, known_types=known)
        builtin = key.group in BUILTIN_GROUPS
        raw = diff_objects(d, lv)
        if not raw:
            return ResourceDrift(key, "synced")
        out: list[Classified] = []
        rules = self.rules.matching(key.group, key.kind, key.name, key.namespace)
        changes = raw
        ignoring = any(r.json_pointers or r.jq_path_expressions for r in rules)
        if ignoring:
            d = self.rules.normalize(d, rules)
            kept = diff_objects(d, self.rules.normalize(lv, rules))
            kept_paths = {c.stable_path for c in kept}
            for c in raw:
                if c.stable_path not in kept_paths:
                    out.append(Classified(key, c, IGNORED, reason=_rule_reason(rules)))
            changes = kept
        if changes:
            changes = _split_added_maps(changes)
            changes = _remarshalled(changes, key.kind) if builtin else changes
            trusted = self.rules.trusted_managers(key.group, key.kind, key.name, key.namespace)
            ctx = _Context(live_raw, self.policy)
            # gitops-engine diff.go Diff: server-side apply's structured merge when the app or the
            # object says ServerSideApply=true; the three-way merge on last-applied otherwise
            ssa = self.server_side_apply or "ServerSideApply=true" in _csv(
                _annotations(desired).get(_SYNC_OPTIONS)
            )
            orig: Any = None
            if not predicted and not ssa and isinstance(ctx.last_applied, dict):
                # diff.go Diff: the original is normalized, never re-marshalled
                orig = normalize(ctx.last_applied, key.group, key.kind, options=options, known_types=known)
                if ignoring:
                    orig = self.rules.normalize(orig, rules)
            merge = key.group in BUILTIN_GROUPS
            for c in changes:
                if predicted:
                    modified = True
                elif ssa:
                    modified = _ssa_modified(c, ctx, merge=merge, kind=key.kind)
                elif not merge and c.op == "add" and _lookup(d, c.segments) == (True, None):
                    modified = True  # a JSON merge patch deletes what Git sets to null
                else:
                    modified = _argo_modified(c, orig, merge=merge, group=key.group, kind=key.kind)
                if modified:
                    out.append(self._classify(key, c, ctx, trusted))
                else:
                    out.append(self._unmodified(key, c, ctx, trusted))
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

    def _unmodified(
        self, key: ResourceKey, change: FieldChange, ctx: _Context, trusted: dict[str, str]
    ) -> Classified:
        """A change Argo CD's three-way comparison does not count (the app stays Synced): only
        quiet classes, whoever wrote it."""
        owners = ctx.owners(change.segments)
        for o in owners:
            if o.manager in trusted:
                return Classified(
                    key, change, IGNORED, o.actor, f"managedFieldsManagers {o.manager} ({trusted[o.manager]})"
                )
        ctrl = [o for o in owners if o.manager in self.policy.controllers]
        if ctrl:
            return Classified(key, change, CONTROLLER, _newest(ctrl).actor, "written by a controller")
        others = [o for o in owners if o.manager not in self.policy.argocd_managers]
        if others:
            return Classified(
                key,
                change,
                IGNORED,
                _newest(others).actor,
                "set in the cluster on a field Git does not declare; Argo CD does not compare it (Synced)",
            )
        return Classified(
            key,
            change,
            ADMISSION_DEFAULT,
            _newest(owners).actor if owners else None,
            "not in Git and not last applied: a default Argo CD does not compare",
        )

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
                if change.op == "add" and all(o.operation == "Apply" for o in owners):
                    # server-side apply owns only what Git applied: Git has dropped it since
                    return Classified(
                        key, change, PENDING_SYNC, actor, "removed from Git; Argo CD's apply will remove it"
                    )
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


def _remarshalled(changes: list[FieldChange], kind: str) -> list[FieldChange]:
    """The differences left once gitops-engine's remarshal has run on both sides (built-in kinds)."""
    out = []
    for c in changes:
        view = remarshal_view(c.segments, c.op, c.old, c.new, kind)
        if view is None:
            continue
        if view[0] != c.op:
            c = FieldChange(c.path, view[0], view[1], view[2], c.segments)
        out.append(c)
    return out


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


# Kinds of groups outside client-go's scheme whose scope is known to be namespaced.
_KNOWN_NAMESPACED: frozenset[tuple[str, str]] = (
    frozenset(
        {("argoproj.io", "Rollout"), ("argoproj.io", "AnalysisTemplate"), ("argoproj.io", "Application")}
    )
    - CLUSTER_SCOPED
)


def _argo_modified(change: FieldChange, orig: Any, *, merge: bool, group: str = "", kind: str = "") -> bool:
    """Whether Argo CD's three-way merge (gitops-engine diff.go ThreeWayDiff; ``orig`` is the
    last-applied configuration, or None when there is none and Git itself stands in: TwoWayDiff)
    would change this field, i.e. whether it counts towards OutOfSync.

    The patch sets what Git declares (``remove``/``replace`` here: Git has it, the cluster lacks it
    or differs) and deletes only what was last applied and is gone from Git. A field only the
    cluster has survives the patch, unless it sits in a list the patch replaces whole: any list of
    a custom resource (JSON merge patch) or a built-in list without ``patchStrategy: merge``
    (strategic merge; driftguard/k8s_fields.py MERGE_LISTS). A merged list's order alone is not a
    change (strategic merge sends ``$setElementOrder`` only with other changes to the list).
    """
    segs = change.segments
    if change.op == "replace" and change.reorder:
        return not (merge and _merged_list(segs, len(segs), kind))
    if change.op != "add":
        return True
    # diff.go statefulSetWorkaround: live fields the original lacks are dropped from the claim
    # templates before the patch (the API server defaults them where Argo cannot)
    if (
        group in ("apps", "extensions")
        and kind == "StatefulSet"
        and segs[:2] == ("spec", "volumeClaimTemplates")
        and len(segs) > 3
    ):
        return orig is not None and _lookup(orig, segs)[0]
    for i, seg in enumerate(segs):
        if isinstance(seg, ListSeg) and not (merge and _merged_list(segs, i, kind)):
            return True
    if orig is None:
        return False
    return _lookup(orig, segs)[0]


def _ssa_modified(change: FieldChange, ctx: _Context, *, merge: bool, kind: str) -> bool:
    """Whether server-side apply of Git as Argo CD's manager would change this field
    (gitops-engine diff.go structuredMergeDiff): Git's values are set; a field only the cluster
    has is removed only when Argo CD's apply owned it and no other manager does; a list the
    schema treats as atomic is replaced whole."""
    segs = change.segments
    if change.op == "replace" and change.reorder:
        return not (merge and _merged_list(segs, len(segs), kind))
    if change.op != "add":
        return True
    if any(
        isinstance(seg, ListSeg) and not (merge and _merged_list(segs, i, kind)) for i, seg in enumerate(segs)
    ):
        return True
    owners = ctx.owners(segs)
    ours = [o for o in owners if o.manager == _SSA_MANAGER and o.operation == "Apply"]
    return bool(ours) and len(ours) == len(owners)


def _merged_list(segs: tuple[Segment, ...], i: int, kind: str) -> bool:
    """Whether the list whose item is ``segs[i]`` (or that ``segs[:i]`` names) merges by key."""
    name = segs[i - 1] if i >= 1 and isinstance(segs[i - 1], str) else None
    if name is None:
        return False
    j = i - 2
    if j < 0:
        parent: Segment | None = "^" + kind
    elif isinstance(segs[j], str):
        parent = segs[j]
    else:  # inside a list item: the item's struct sits under the list's field name
        parent = segs[j - 1] if j >= 1 and isinstance(segs[j - 1], str) else None
    return isinstance(parent, str) and (parent, name) in MERGE_LISTS


_TRACKING_ID = "argocd.argoproj.io/tracking-id"  # common/common.go AnnotationKeyAppInstance
_INSTALLATION_ID = "argocd.argoproj.io/installation-id"  # common/common.go AnnotationInstallationID
_INSTANCE_LABEL = "app.kubernetes.io/instance"  # common/common.go LabelKeyAppInstance


def _with_tracking(desired: dict[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """Git's object with the tracking metadata Argo CD puts on every target before it compares
    (controller/state.go NormalizeTargetObjects -> util/argo/resource_tracking.go SetAppInstance).

    A rendered manifest never carries it, so the live object's values stand in (they are what
    Argo CD set for this app): the tracking-id and installation-id annotations, and the instance
    label when the app tracks by label (no tracking-id) or the label names the tracking-id's app.
    """
    meta = live.get("metadata")
    if not isinstance(meta, dict):
        return desired
    live_ann = meta.get("annotations")
    live_ann = live_ann if isinstance(live_ann, dict) else {}
    live_labels = meta.get("labels")
    live_labels = live_labels if isinstance(live_labels, dict) else {}
    if (
        _TRACKING_ID not in live_ann
        and _INSTALLATION_ID not in live_ann
        and _INSTANCE_LABEL not in live_labels
    ):
        return desired  # the common case on the --desired/--live path of a plain cluster
    add_ann = {k: live_ann[k] for k in (_TRACKING_ID, _INSTALLATION_ID) if isinstance(live_ann.get(k), str)}
    add_labels: dict[str, Any] = {}
    label = live_labels.get(_INSTANCE_LABEL)
    if isinstance(label, str):
        tracking = live_ann.get(_TRACKING_ID)
        if not isinstance(tracking, str) or tracking.split(":", 1)[0][:63] == label:
            add_labels[_INSTANCE_LABEL] = label
    d_meta = desired.get("metadata")
    if not (add_ann or add_labels) or not isinstance(d_meta, dict):
        return desired
    d_ann = d_meta.get("annotations") if isinstance(d_meta.get("annotations"), dict) else {}
    d_labels = d_meta.get("labels") if isinstance(d_meta.get("labels"), dict) else {}
    add_ann = {k: v for k, v in add_ann.items() if k not in (d_ann or {})}
    add_labels = {k: v for k, v in add_labels.items() if k not in (d_labels or {})}
    if not (add_ann or add_labels):
        return desired
    new_meta = dict(d_meta)
    if add_ann:
        new_meta["annotations"] = {**(d_ann or {}), **add_ann}
    if add_labels:
        new_meta["labels"] = {**(d_labels or {}), **add_labels}
    return {**desired, "metadata": new_meta}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, dict) else None
    return ann if isinstance(ann, dict) else {}


def _csv(value: Any) -> list[str]:
    return [p.strip() for p in str(value).split(",") if p.strip()] if value is not None else []


def _is_hook(obj: Mapping[str, Any]) -> bool:
    """gitops-engine pkg/sync/hook/hook.go IsHook (+ argo-cd controller/hook.go isHook)."""
    ann = _annotations(obj)
    if _HOOK in ann:
        return [t for t in _csv(ann[_HOOK]) if t in _HOOK_TYPES] != ["Skip"]
    return _HELM_HOOK in ann and ann[_HELM_HOOK] != "crd-install"


def _ignored_object(obj: Mapping[str, Any]) -> bool:
    """gitops-engine pkg/sync/ignore/ignore.go Ignore (a hook annotation naming no hook type) and
    hook.go Skip (``argocd.argoproj.io/hook: Skip``): not part of the comparison."""
    ann = _annotations(obj)
    if _HOOK in ann:
        types = [t for t in _csv(ann[_HOOK]) if t in _HOOK_TYPES]
        return not types or types == ["Skip"]
    if _HELM_HOOK in ann and ann[_HELM_HOOK] != "crd-install":
        return not [t for t in _csv(ann[_HELM_HOOK]) if t in _HELM_HOOK_TYPES]
    return False


def _unmanaged_reason(live: Mapping[str, Any]) -> str | None:
    """Why a cluster-only resource does not make the app OutOfSync (controller/state.go), or None."""
    if _is_hook(live) or _ignored_object(live):
        return "a hook: Argo CD runs hooks, it does not compare or prune them"
    if "IgnoreExtraneous" in _csv(_annotations(live).get(_COMPARE_OPTIONS)):
        return "compare-options IgnoreExtraneous: Argo CD keeps the app Synced (a sync with prune would delete it)"
    return None

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
ignoreDifferences, keep only the changes Argo's three-way merge would make (``three_way.argo_modified``),
and only then classify. A change Argo does not count gets a quiet class (``ignored``,
``controller`` or ``admission-default``), so driftguard never alerts where Argo CD shows Synced.
"""

# The records and classes live in drift_classes.py (re-exported here), ownership in ownership.py,
# the three-way decision in three_way.py, tracking and hooks in argo_objects.py.

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from driftguard.argo_objects import (
    annotations_of,
    csv,
    ignored_object,
    is_hook,
    unmanaged_reason,
    with_tracking,
)
from driftguard.diff import FieldChange, diff_objects, pointer
from driftguard.drift_classes import (
    ADMISSION_DEFAULT,
    ALERTING,
    ARGOCD_MANAGERS,
    CLASSES,
    CONTROLLER,
    DEFAULT_CONTROLLERS,
    HUMAN,
    IGNORED,
    MISSING,
    PENDING_SYNC,
    PRUNE_CANDIDATE,
    Actor,
    Classified,
    Policy,
    ResourceDrift,
)
from driftguard.ignore import IgnoreRules
from driftguard.manifests import CLUSTER_SCOPED, ResourceKey, cluster_scoped_kinds, group_of, resource_key
from driftguard.normalize import BUILTIN_GROUPS, normalize, remarshal_view
from driftguard.ownership import Ownership, lookup, newest
from driftguard.redact import Redactor
from driftguard.three_way import argo_modified, ssa_modified

__all__ = [
    "ADMISSION_DEFAULT",
    "ALERTING",
    "ARGOCD_MANAGERS",
    "CLASSES",
    "CONTROLLER",
    "DEFAULT_CONTROLLERS",
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

_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
# Kinds of groups outside client-go's scheme whose scope is known to be namespaced.
_KNOWN_NAMESPACED: frozenset[tuple[str, str]] = (
    frozenset(
        {("argoproj.io", "Rollout"), ("argoproj.io", "AnalysisTemplate"), ("argoproj.io", "Application")}
    )
    - CLUSTER_SCOPED
)


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
            if ignored_object(obj) or is_hook(obj):
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
            quiet = unmanaged_reason(live)
            if quiet is not None:
                return ResourceDrift(key, "synced", [Classified(key, whole, IGNORED, reason=quiet)])
            reason = "in the cluster, not in Git: Argo CD would prune it"
            return ResourceDrift(
                key, PRUNE_CANDIDATE, [Classified(key, whole, PRUNE_CANDIDATE, reason=reason)]
            )
        live_raw = live_raw or live
        desired = with_tracking(desired, live)
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
            ctx = Ownership(live_raw, self.policy)
            # gitops-engine diff.go Diff: server-side apply's structured merge when the app or the
            # object says ServerSideApply=true; the three-way merge on last-applied otherwise
            ssa = self.server_side_apply or "ServerSideApply=true" in csv(
                annotations_of(desired).get(_SYNC_OPTIONS)
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
                    modified = ssa_modified(c, ctx, merge=merge, kind=key.kind)
                elif not merge and c.op == "add" and lookup(d, c.segments) == (True, None):
                    modified = True  # a JSON merge patch deletes what Git sets to null
                else:
                    modified = argo_modified(c, orig, merge=merge, group=key.group, kind=key.kind)
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
        self, key: ResourceKey, change: FieldChange, ctx: Ownership, trusted: dict[str, str]
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
            return Classified(key, change, CONTROLLER, newest(ctrl).actor, "written by a controller")
        others = [o for o in owners if o.manager not in self.policy.argocd_managers]
        if others:
            return Classified(
                key,
                change,
                IGNORED,
                newest(others).actor,
                "set in the cluster on a field Git does not declare; Argo CD does not compare it (Synced)",
            )
        return Classified(
            key,
            change,
            ADMISSION_DEFAULT,
            newest(owners).actor if owners else None,
            "not in Git and not last applied: a default Argo CD does not compare",
        )

    def _classify(
        self, key: ResourceKey, change: FieldChange, ctx: Ownership, trusted: dict[str, str]
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
                return Classified(key, change, CONTROLLER, newest(ctrl).actor, "written by a controller")
            others = [o for o in owners if o.manager not in policy.argocd_managers]
            if not others:
                actor = newest(owners).actor
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
            return Classified(key, change, HUMAN, newest(others).actor, "changed outside Git")
        if ctx.last_applied is not None:
            in_la, la_value = lookup(ctx.last_applied, change.segments)
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

"""What Argo CD keeps of a render: the one place every guard learns which resources survive a sync.

A resource the render prints is not necessarily one Argo CD keeps: the live object it stands for
is pruned unless it lands in gitops-engine's sync *target*. Upstream, in order (argo-cd v3.5.1):

1. reposerver/repository/repository.go (GenerateManifests): List flattening by apimachinery's
   ``Unstructured.IsList`` (any kind with an ``items`` list) and ``isNullList`` (dropped): done
   when the stream is read (driftguard/manifests.py ``_flatten``; the scanner parses every
   document with a top-level ``items`` key, cmp_plugin/scan.py ``may_decide_kept``).
2. controller/state.go ``NormalizeTargetObjects``: a namespaced (or unknown-scope) object without
   a namespace gets ``spec.destination.namespace`` (what the CMP sees as ``ARGOCD_APP_NAMESPACE``,
   never a plugin parameter), a cluster-scoped one loses its namespace; objects with the same key
   collapse to the last one (a nameless object is keyed ``generateName`` + its position).
3. controller/state.go ``partitionTargetObjsForSync`` with controller/hook.go: PreDelete and
   PostDelete hooks (``argocd.argoproj.io/hook`` or ``helm.sh/hook`` ``pre-delete``/``post-delete``,
   comma-separated) leave unless they also name a sync phase.
4. gitops-engine/pkg/sync/reconcile.go ``splitHooks``: ``ignore.Ignore`` (pkg/sync/ignore: a hook
   with no known type) and ``hook.IsHook`` (pkg/sync/hook/hook.go, Helm's annotation mapped by
   pkg/sync/hook/helm) leave the target. What is left is kept, keyed by ``GetName()`` (a nameless
   object matches no live one).

Annotations are read as ``Unstructured.GetAnnotations`` reads them: a map with any non-string
value is no map at all. Scope comes from the built-in table and the render's CRDs (Argo CD asks
the cluster; a kind neither knows is namespaced, as ``IsNamespacedOrUnknown`` treats it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from driftguard.manifests import ResourceKey

if TYPE_CHECKING:
    from cmp_plugin.scan import Doc

__all__ = ["KEPT", "Target", "role", "target"]

ARGO_HOOK = "argocd.argoproj.io/hook"
HELM_HOOK = "helm.sh/hook"
# gitops-engine pkg/sync/common/types.go NewHookType
_ARGO_TYPES = frozenset({"PreSync", "Sync", "PostSync", "SyncFail", "Skip"})
_SYNC_PHASES = frozenset({"PreSync", "Sync", "PostSync", "SyncFail"})
# gitops-engine pkg/sync/hook/helm/type.go: the Helm hooks Argo CD maps to a phase
_HELM_TYPES = {
    "pre-install": "PreSync",
    "pre-upgrade": "PreSync",
    "post-upgrade": "PostSync",
    "post-install": "PostSync",
}
# controller/hook.go hookTypeAnnotations
_DELETE_HOOKS = ((ARGO_HOOK, ("PreDelete", "PostDelete")), (HELM_HOOK, ("pre-delete", "post-delete")))

KEPT, HOOK, IGNORED, DELETE_HOOK = "kept", "hook", "ignored", "delete-hook"


class Target(NamedTuple):
    """A render as Argo CD's sync sees it."""

    keys: list[ResourceKey]
    """``docs[i]``'s key after NormalizeTargetObjects (a nameless one: ``generateName`` + ``i``)."""
    kept: list[ResourceKey]
    """The keys left in the sync target, in render order, once each: what keeps a live object."""
    left_out: list[tuple[int, str]]
    """(index in docs, why) of every document that is not kept: hook, ignored, delete-hook, or replaced."""


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    """``Unstructured.GetAnnotations``: the map, or nothing when any value is not a string."""
    meta = obj.get("metadata")
    found = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        return {}
    return {str(k): v for k, v in found.items()}


def _csv(value: str) -> list[str]:
    """gitops-engine pkg/sync/resource/annotations.go GetAnnotationCSVs: trimmed, non-empty, deduplicated."""
    out: list[str] = []
    for item in value.split(","):
        item = item.strip()
        if item and item not in out:
            out.append(item)
    return out


def role(obj: dict[str, Any] | None) -> str:
    """KEPT, HOOK, IGNORED or DELETE_HOOK for one flattened object (None: proved to carry no hook)."""
    if obj is None:
        return KEPT
    notes = annotations_of(obj)
    if not notes:
        return KEPT
    argo = notes.get(ARGO_HOOK)
    argo_types = [t for t in _csv(argo) if t in _ARGO_TYPES] if argo is not None else []
    types = argo_types or [
        _HELM_TYPES[t] for t in _csv(notes.get(HELM_HOOK, "")) if t in _HELM_TYPES
    ]  # hook.go Types: Helm's hooks count only when no Argo CD type is known
    # controller/state.go partitionTargetObjsForSync, controller/hook.go isHookOfType
    deleting = any(
        key in notes and any(v.strip() in values for v in notes[key].split(","))
        for key, values in _DELETE_HOOKS
    )
    if deleting and not any(t in _SYNC_PHASES for t in types):
        return DELETE_HOOK
    # hook.go IsHook: an Argo CD hook annotation decides alone, unless its only type is Skip
    if argo is not None:
        is_hook = not ("Skip" in types and len(types) == 1)
    else:
        is_hook = HELM_HOOK in notes and notes[HELM_HOOK] != "crd-install"  # hook/helm/hook.go
    if not is_hook:
        return KEPT
    return HOOK if types else IGNORED  # ignore.go Ignore: a hook of no known type


def target(docs: list[Doc], *, destination_namespace: str) -> Target:
    """What Argo CD keeps of ``docs`` for an Application whose destination namespace is given."""
    from cmp_plugin.scan import keys_of

    keys = keys_of(docs, default_namespace=destination_namespace)
    last: dict[ResourceKey, int] = {}
    for i, key in enumerate(keys):
        last[key] = i  # NormalizeTargetObjects keeps the last object of each key
    kept: list[ResourceKey] = []
    left_out: list[tuple[int, str]] = []
    for i, doc in enumerate(docs):
        if last[keys[i]] != i:
            left_out.append((i, "replaced"))
            continue
        why = role(doc.obj)
        if why != KEPT:
            left_out.append((i, why))
            continue
        key = keys[i]
        kept.append(key if doc.named else key._replace(name=""))
    return Target(keys, kept, left_out)

"""Which rendered documents Argo CD keeps as resources: hooks are run, never kept or pruned.

The predicate ``is_kept`` follows Argo CD v3.5.1 exactly (our own words, read from upstream):

- gitops-engine ``pkg/sync/reconcile.go`` ``splitHooks``: an object that ``ignore.Ignore`` drops
  (``pkg/sync/ignore/ignore.go``: a hook with no hook type) or that ``hook.IsHook`` calls a hook is
  taken out of the target objects;
- ``pkg/sync/hook/hook.go`` ``IsHook``: with an ``argocd.argoproj.io/hook`` annotation (any value)
  it is a hook unless ``Skip`` (``Skip`` is the only known type in the comma list); without one,
  ``pkg/sync/hook/helm/hook.go``: a ``helm.sh/hook`` annotation makes a hook unless it is exactly
  ``crd-install``;
- argo-cd ``controller/state.go`` ``partitionTargetObjsForSync`` (with ``controller/hook.go``): a
  PreDelete / PostDelete hook (``argocd.argoproj.io/hook`` or ``helm.sh/hook: pre-delete`` /
  ``post-delete``) without a sync-phase hook type is not synced either.

Issue 27 builds the guards' whole kept set (Lists, namespaces); this module is the hook rule only,
kept small and named so that the two can be joined. ``kept_mask`` applies it to a rendered stream
without parsing documents that carry no hook annotation (a YAML parse of a large chart costs more
than the render).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cmp_plugin.scan import Doc

__all__ = ["is_kept", "kept_mask"]

ARGO_HOOK = "argocd.argoproj.io/hook"
HELM_HOOK = "helm.sh/hook"
# gitops-engine pkg/sync/common/types.go NewHookType
_ARGO_TYPES = frozenset({"PreSync", "Sync", "PostSync", "SyncFail", "Skip"})
_SYNC_PHASES = frozenset({"PreSync", "Sync", "PostSync", "SyncFail"})
# gitops-engine pkg/sync/hook/helm/type.go NewType and its mapping to Argo CD's phases
_HELM_TYPES = {
    "pre-install": "PreSync",
    "pre-upgrade": "PreSync",
    "post-upgrade": "PostSync",
    "post-install": "PostSync",
}
# argo-cd controller/hook.go hookTypeAnnotations
_DELETE_HOOKS = {ARGO_HOOK: ("PreDelete", "PostDelete"), HELM_HOOK: ("pre-delete", "post-delete")}


def _csv(value: Any) -> list[str]:
    """resource.GetAnnotationCSVs: comma-separated, trimmed, empty items dropped, duplicates once."""
    return list(dict.fromkeys(p.strip() for p in str(value).split(",") if p.strip()))


def _types(ann: Mapping[str, Any]) -> list[str]:
    """hook.Types: the Argo CD hook types, else the Helm ones mapped to Argo CD's phases."""
    types = [t for t in _csv(ann.get(ARGO_HOOK, "")) if t in _ARGO_TYPES]
    if not types:
        types = [_HELM_TYPES[t] for t in _csv(ann.get(HELM_HOOK, "")) if t in _HELM_TYPES]
    return types


def _is_hook(ann: Mapping[str, Any]) -> bool:
    if ARGO_HOOK in ann:
        types = _types(ann)
        skip = "Skip" in types and len(types) == 1
        return not skip
    return HELM_HOOK in ann and ann[HELM_HOOK] != "crd-install"


def is_kept(annotations: Mapping[str, Any] | None) -> bool:
    """True when Argo CD keeps (compares, syncs, prunes) an object with these annotations."""
    ann = annotations if isinstance(annotations, Mapping) else {}
    if _is_hook(ann):
        return False  # splitHooks: a hook (or, with no type, ignored): never a kept resource
    for key, kinds in _DELETE_HOOKS.items():
        # partitionTargetObjsForSync drops a delete hook unless it is also a sync-phase hook
        delete_hook = key in ann and any(item.strip() in kinds for item in str(ann[key]).split(","))
        if delete_hook and not any(t in _SYNC_PHASES for t in _types(ann)):
            return False
    return True


def kept_mask(text: str, docs: list[Doc]) -> list[bool]:
    """``is_kept`` for each of ``docs`` (the scan of ``text``); only documents mentioning a hook
    annotation are parsed."""
    if ARGO_HOOK not in text and HELM_HOOK not in text:
        return [True] * len(docs)
    from driftguard.errors import ManifestError
    from driftguard.manifests import load_stream, split_documents

    chunks = list(split_documents(text))
    starts = [line for line, _ in chunks]
    hooks: dict[int, dict[tuple[str, str], bool]] = {}
    out: list[bool] = []
    for d in docs:
        at = max(0, bisect_right(starts, d.line) - 1)
        chunk = chunks[at][1]
        if ARGO_HOOK not in chunk and HELM_HOOK not in chunk:
            out.append(True)
            continue
        if at not in hooks:
            found: dict[tuple[str, str], bool] = {}
            try:
                for item in load_stream(chunk, source="render"):
                    meta = item.obj.get("metadata") if isinstance(item.obj, dict) else None
                    ann = meta.get("annotations") if isinstance(meta, dict) else None
                    name = meta.get("name") if isinstance(meta, dict) else None
                    found[(str(item.obj.get("kind")), str(name))] = is_kept(ann)
            except ManifestError:
                found = {}  # the main scan read it; an unreadable annotation block counts as kept
            hooks[at] = found
        out.append(hooks[at].get((d.kind, d.name), True))
    return out

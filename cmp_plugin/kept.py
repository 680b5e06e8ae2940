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

The rule is ``cmp_plugin.target``'s (the guards' whole kept set: Lists, namespaces, hooks);
``is_kept`` asks it about one annotation map. ``kept_mask`` applies it to a rendered stream
without parsing documents that carry no hook annotation (a YAML parse of a large chart costs more
than the render).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cmp_plugin.target import KEPT, role

if TYPE_CHECKING:
    from cmp_plugin.scan import Doc

__all__ = ["is_kept", "kept_mask"]

ARGO_HOOK = "argocd.argoproj.io/hook"
HELM_HOOK = "helm.sh/hook"


def is_kept(annotations: Mapping[str, Any] | None) -> bool:
    """True when Argo CD keeps (compares, syncs, prunes) an object with these annotations.

    The rule itself is the guards' (``cmp_plugin.target.role``): one reading of upstream for both.
    """
    ann = dict(annotations) if isinstance(annotations, Mapping) else None
    return role({"metadata": {"annotations": ann}}) == KEPT


def kept_mask(text: str, docs: list[Doc]) -> list[bool]:
    """``is_kept`` for each of ``docs`` (the scan of ``text``); only documents mentioning a hook
    annotation (or a tag or an escape that may spell one: ``cmp_plugin.scan``) are parsed."""
    from cmp_plugin.scan import may_decide_kept

    if not may_decide_kept(text, 0, len(text)):
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
        if not may_decide_kept(chunk, 0, len(chunk)):  # the scanner's rule: a tag may spell the key
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

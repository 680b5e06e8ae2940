"""What Argo CD does to objects around the comparison: the tracking metadata it sets on every
target, and the hooks and ``IgnoreExtraneous`` objects it leaves out (argo-cd controller/state.go,
gitops-engine pkg/sync/hook and pkg/sync/ignore)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["annotations_of", "csv", "ignored_object", "is_hook", "unmanaged_reason", "with_tracking"]

_HOOK = "argocd.argoproj.io/hook"
_HELM_HOOK = "helm.sh/hook"
_COMPARE_OPTIONS = "argocd.argoproj.io/compare-options"
# gitops-engine pkg/sync/common/types.go NewHookType, hook/helm/type.go NewType, and argo-cd
# controller/hook.go (PreDelete/PostDelete)
_HOOK_TYPES = frozenset({"PreSync", "Sync", "PostSync", "SyncFail", "Skip", "PreDelete", "PostDelete"})
_HELM_HOOK_TYPES = frozenset(
    {"pre-install", "pre-upgrade", "post-upgrade", "post-install", "pre-delete", "post-delete"}
)
_TRACKING_ID = "argocd.argoproj.io/tracking-id"  # common/common.go AnnotationKeyAppInstance
_INSTALLATION_ID = "argocd.argoproj.io/installation-id"  # common/common.go AnnotationInstallationID
_INSTANCE_LABEL = "app.kubernetes.io/instance"  # common/common.go LabelKeyAppInstance


def with_tracking(desired: dict[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
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


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, dict) else None
    return ann if isinstance(ann, dict) else {}


def csv(value: Any) -> list[str]:
    return [p.strip() for p in str(value).split(",") if p.strip()] if value is not None else []


def is_hook(obj: Mapping[str, Any]) -> bool:
    """gitops-engine pkg/sync/hook/hook.go IsHook (+ argo-cd controller/hook.go isHook)."""
    ann = annotations_of(obj)
    if _HOOK in ann:
        return [t for t in csv(ann[_HOOK]) if t in _HOOK_TYPES] != ["Skip"]
    return _HELM_HOOK in ann and ann[_HELM_HOOK] != "crd-install"


def ignored_object(obj: Mapping[str, Any]) -> bool:
    """gitops-engine pkg/sync/ignore/ignore.go Ignore (a hook annotation naming no hook type) and
    hook.go Skip (``argocd.argoproj.io/hook: Skip``): not part of the comparison."""
    ann = annotations_of(obj)
    if _HOOK in ann:
        types = [t for t in csv(ann[_HOOK]) if t in _HOOK_TYPES]
        return not types or types == ["Skip"]
    if _HELM_HOOK in ann and ann[_HELM_HOOK] != "crd-install":
        return not [t for t in csv(ann[_HELM_HOOK]) if t in _HELM_HOOK_TYPES]
    return False


def unmanaged_reason(live: Mapping[str, Any]) -> str | None:
    """Why a cluster-only resource does not make the app OutOfSync (controller/state.go), or None."""
    if is_hook(live) or ignored_object(live):
        return "a hook: Argo CD runs hooks, it does not compare or prune them"
    if "IgnoreExtraneous" in csv(annotations_of(live).get(_COMPARE_OPTIONS)):
        return "compare-options IgnoreExtraneous: Argo CD keeps the app Synced (a sync with prune would delete it)"
    return None

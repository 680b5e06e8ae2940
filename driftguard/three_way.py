"""Whether Argo CD would change a field: the three-way merge and server-side apply decisions.

A difference between Git and the cluster counts towards OutOfSync only when the patch Argo CD
would send changes it (gitops-engine pkg/diff/diff.go ``ThreeWayDiff``, ``TwoWayDiff``,
``structuredMergeDiff``); the drift engine (``driftguard/drift.py``) classifies only those.
"""

from __future__ import annotations

from typing import Any

from driftguard.diff import FieldChange, ListSeg, Segment
from driftguard.k8s_fields import MERGE_LISTS
from driftguard.ownership import Ownership, lookup

__all__ = ["argo_modified", "ssa_modified"]

SSA_MANAGER = "argocd-controller"  # argo-cd common/common.go ArgoCDSSAManager


def argo_modified(change: FieldChange, orig: Any, *, merge: bool, group: str = "", kind: str = "") -> bool:
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
        return orig is not None and lookup(orig, segs)[0]
    for i, seg in enumerate(segs):
        if isinstance(seg, ListSeg) and not (merge and _merged_list(segs, i, kind)):
            return True
    if orig is None:
        return False
    return lookup(orig, segs)[0]


def ssa_modified(change: FieldChange, ctx: Ownership, *, merge: bool, kind: str) -> bool:
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
    ours = [o for o in owners if o.manager == SSA_MANAGER and o.operation == "Apply"]
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

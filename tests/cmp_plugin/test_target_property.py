"""The guards' kept set (cmp_plugin/target.py over the scanner) equals a reference model of Argo CD.

The model below is written from upstream's code (argo-cd v3.5.1), step for step, on the objects
before they are serialised; the guard reads the serialised render the way the plugin does.
- reposerver/repository/repository.go GenerateManifests + isNullList, with apimachinery's
  Unstructured.IsList / EachListItem;
- controller/state.go NormalizeTargetObjects (namespace, dedup: the last wins, generateName + i)
  and partitionTargetObjsForSync with controller/hook.go (PreDelete/PostDelete);
- gitops-engine/pkg/sync/reconcile.go splitHooks, pkg/sync/ignore Ignore, pkg/sync/hook IsHook,
  Skip, Types, pkg/sync/hook/helm IsHook/Types, pkg/sync/resource GetAnnotationCSVs.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cmp_plugin.scan import scan_stream
from cmp_plugin.target import target
from driftguard.manifests import CLUSTER_SCOPED
from tests.helpers import examples

DEST = "apps"

# ----------------------------------------------------------------- the model, from upstream's Go


def get_annotations(o: dict[str, Any]) -> dict[str, str] | None:
    """Unstructured.GetAnnotations: NestedStringMap, nil on any non-string value."""
    meta = o.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("annotations"), dict):
        return None
    m = meta["annotations"]
    for v in m.values():
        if not isinstance(v, str):
            return None
    return m


def annotation_csvs(o: dict[str, Any], key: str) -> list[str]:
    seen: list[str] = []
    for item in ((get_annotations(o) or {}).get(key, "")).split(","):
        val = item.strip()
        if val == "" or val in seen:
            continue
        seen.append(val)
    return seen


def helm_types(o: dict[str, Any]) -> list[str]:
    return [
        t
        for t in annotation_csvs(o, "helm.sh/hook")
        if t in ("pre-install", "pre-upgrade", "post-upgrade", "post-install")
    ]


HELM_MAP = {
    "pre-install": "PreSync",
    "pre-upgrade": "PreSync",
    "post-upgrade": "PostSync",
    "post-install": "PostSync",
}


def types(o: dict[str, Any]) -> list[str]:
    ts = [
        t
        for t in annotation_csvs(o, "argocd.argoproj.io/hook")
        if t in ("PreSync", "Sync", "PostSync", "SyncFail", "Skip")
    ]
    if len(ts) == 0:
        ts = [HELM_MAP[t] for t in helm_types(o)]
    return ts


def skip(o: dict[str, Any]) -> bool:
    for t in types(o):
        if t == "Skip":
            return len(types(o)) == 1
    return False


def helm_is_hook(o: dict[str, Any]) -> bool:
    anns = get_annotations(o) or {}
    return "helm.sh/hook" in anns and anns["helm.sh/hook"] != "crd-install"


def is_hook(o: dict[str, Any]) -> bool:
    if "argocd.argoproj.io/hook" in (get_annotations(o) or {}):
        return not skip(o)
    return helm_is_hook(o)


def ignore(o: dict[str, Any]) -> bool:
    return is_hook(o) and len(types(o)) == 0


def is_hook_of_type(o: dict[str, Any], values: dict[str, str]) -> bool:
    anns = get_annotations(o)
    if anns is None:
        return False
    for k, v in values.items():  # noqa: SIM110 - as the Go reads
        if k in anns and any(item.strip() == v for item in anns[k].split(",")):
            return True
    return False


def has_sync_phase_hook(o: dict[str, Any]) -> bool:
    return any(t in ("PreSync", "Sync", "PostSync", "SyncFail") for t in types(o))


def get_string(o: dict[str, Any], field: str) -> str:
    meta = o.get("metadata")
    v = meta.get(field) if isinstance(meta, dict) else None
    return v if isinstance(v, str) else ""


def model(
    objs: list[dict[str, Any]],
) -> tuple[set[tuple[str, str, str, str]], set[tuple[str, str, str, str]]]:
    """(kept keys, keys that appeared more than once) as Argo CD computes them."""
    flat: list[dict[str, Any]] = []
    for o in objs:  # repository.go: IsList -> EachListItem; isNullList -> noop
        if isinstance(o.get("items"), list):
            flat += o["items"]
        elif "spec" not in o and "status" not in o and "items" in o and o["items"] is None:
            pass
        else:
            flat.append(o)
    by_key: dict[tuple[str, str, str, str], list[tuple[dict[str, Any], str]]] = {}
    for i, o in enumerate(flat):  # NormalizeTargetObjects
        group = o["apiVersion"].rpartition("/")[0]
        namespaced = (group, o["kind"]) not in CLUSTER_SCOPED
        ns = get_string(o, "namespace")
        if not namespaced:
            ns = ""
        elif ns == "":
            ns = DEST
        key = (group, o["kind"], ns, get_string(o, "name"))
        if key[3] == "" and get_string(o, "generateName") != "":
            key = (*key[:3], f"{get_string(o, 'generateName')}{i}")
        by_key.setdefault(key, []).append((o, ns))
    repeated = {k for k, v in by_key.items() if len(v) > 1}
    result = [v[-1] for v in by_key.values()]
    sync = []
    for o, ns in result:  # partitionTargetObjsForSync
        if is_hook_of_type(o, {"argocd.argoproj.io/hook": "PreDelete", "helm.sh/hook": "pre-delete"}):  # noqa: SIM102
            if not has_sync_phase_hook(o):
                continue
        if is_hook_of_type(o, {"argocd.argoproj.io/hook": "PostDelete", "helm.sh/hook": "post-delete"}):  # noqa: SIM102
            if not has_sync_phase_hook(o):
                continue
        sync.append((o, ns))
    kept = set()
    for o, ns in sync:  # splitHooks
        if ignore(o) or is_hook(o):
            continue
        kept.add((o["apiVersion"].rpartition("/")[0], o["kind"], ns, get_string(o, "name")))
    return kept, repeated


# ----------------------------------------------------------------- documents

ARGO_HOOKS = ["PreSync", "Sync", "PostSync", "SyncFail", "Skip", "Skip,Skip", "Skip, PreSync", "Whenever",
              "", " Sync ", "PreDelete", "PostDelete", "PreDelete,PreSync", "PostDelete, Skip", "Skip,Whenever"]  # fmt: skip
HELM_HOOKS = ["pre-install", "pre-upgrade", "post-install", "post-upgrade", "crd-install", "test", "",
              "pre-delete", "post-delete", "crd-install,pre-install", "pre-delete,post-install", "pre-rollback"]  # fmt: skip
KINDS = [("v1", "PersistentVolumeClaim"), ("apps/v1", "StatefulSet"), ("v1", "Namespace"),
         ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("v1", "ConfigMap"), ("example.com/v1", "Widget")]  # fmt: skip


@st.composite
def resource(draw: st.DrawFn, *, listy: bool = True) -> dict[str, Any]:
    api, kind = draw(st.sampled_from(KINDS))
    meta: dict[str, Any] = {}
    if draw(st.booleans()) or not draw(st.booleans()):
        meta["name"] = draw(st.sampled_from(["data", "db", "web"]))
    else:
        meta["generateName"] = draw(st.sampled_from(["data", "job-"]))
    ns = draw(st.sampled_from([None, "apps", "other"]))
    if ns is not None:
        meta["namespace"] = ns
    notes: dict[str, Any] = {}
    if draw(st.booleans()):
        notes["argocd.argoproj.io/hook"] = draw(st.sampled_from(ARGO_HOOKS))
    if draw(st.booleans()):
        notes["helm.sh/hook"] = draw(st.sampled_from(HELM_HOOKS))
    if notes and draw(st.integers(0, 5)) == 0:
        notes["replicas-note"] = 3  # a non-string value: GetAnnotations returns nothing
    if notes or draw(st.booleans()):
        meta["annotations"] = notes
    obj: dict[str, Any] = {"apiVersion": api, "kind": kind, "metadata": meta}
    if draw(st.booleans()):
        obj["spec"] = {"x": "y"}
    if listy:
        shape = draw(st.sampled_from(["none", "none", "empty", "null", "items"]))
        if shape == "empty":
            obj["items"] = []
        elif shape == "null":
            obj["items"] = None
        elif shape == "items":
            obj["items"] = draw(st.lists(resource(listy=False), max_size=3))
    return obj


def render(objs: list[dict[str, Any]], layout: str) -> str:
    if layout == "json":
        return "".join(json.dumps(o) + "\n---\n" for o in objs)
    head = "---\n# Source: chart/templates/x.yaml\n" if layout == "helm" else "---\n"
    return "".join(head + yaml.safe_dump(o, sort_keys=False, default_flow_style=False) for o in objs)


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(resource(), min_size=1, max_size=6), st.sampled_from(["helm", "plain", "json"]))
def test_kept_set_is_argo_cds(objs: list[dict[str, Any]], layout: str) -> None:
    text = render(objs, layout)
    kept, repeated = model(objs)
    found = target(scan_stream(text), destination_namespace=DEST)
    assert set(found.kept) == kept, text
    counts = Counter(found.keys)
    assert {k for k, n in counts.items() if n > 1} == repeated, text

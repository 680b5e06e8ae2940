"""drift.py: every row of the decision table, on realistic objects with real-shaped managedFields."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from driftguard.drift import (
    ADMISSION_DEFAULT,
    CONTROLLER,
    HUMAN,
    IGNORED,
    MISSING,
    PENDING_SYNC,
    PRUNE_CANDIDATE,
    Classified,
    DriftEngine,
    Policy,
)
from driftguard.ignore import IgnoreRule, IgnoreRules
from driftguard.manifests import resource_key
from standins.drill import (
    ARGO_TIME,
    PATCH_TIME,
    inference_desired,
    inference_live,
    managed_item,
    secret_desired,
    secret_live,
)

GPU = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"


def by_path(changes: list[Classified]) -> dict[str, Classified]:
    return {c.change.path: c for c in changes}


def analyse(
    desired: dict[str, Any] | None, live: dict[str, Any] | None, engine: DriftEngine | None = None
) -> dict[str, Classified]:
    engine = engine or DriftEngine()
    key = resource_key(desired or live or {})
    return by_path(engine.resource(key, desired, live).changes)


# --- the drill ----------------------------------------------------------------------------------


def test_drill_gpu_patch_is_human_with_actor_and_time() -> None:
    changes = analyse(inference_desired(), inference_live())
    gpu = changes[GPU]
    assert (gpu.cls, gpu.change.old, gpu.change.new) == (HUMAN, "2", "4")
    assert gpu.actor is not None
    assert (gpu.actor.manager, gpu.actor.operation, gpu.actor.time) == ("kubectl-patch", "Update", PATCH_TIME)


def test_drill_replicas_by_hpa_is_controller() -> None:  # row 3
    replicas = analyse(inference_desired(), inference_live())["/spec/replicas"]
    assert replicas.cls == CONTROLLER
    assert replicas.actor is not None and replicas.actor.manager == "kube-controller-manager"


def test_drill_defaults_are_admission_defaults() -> None:  # row 8, add
    changes = analyse(inference_desired(), inference_live())
    assert changes["/spec/template/spec/containers/0/imagePullPolicy"].cls == ADMISSION_DEFAULT
    assert changes["/spec/revisionHistoryLimit"].cls == ADMISSION_DEFAULT
    assert not any(p.startswith("/status") or "managedFields" in p for p in changes)


def test_drill_through_managed_resources_alerts_exactly_once() -> None:
    secret = secret_desired("hunter2-planted")
    items = [
        managed_item(inference_desired(), inference_live()),
        managed_item(secret, secret_live(base64.b64encode(b"s3cr3t-planted").decode())),
    ]
    drifts = DriftEngine().managed_resources(items)
    alerting = [c for d in drifts for c in d.alerting]
    assert {c.change.path for c in alerting} == {GPU, "/data/password"}
    dumped = json.dumps([c.to_json() for d in drifts for c in d.changes])
    for planted in ("hunter2-planted", "s3cr3t-planted"):
        assert planted not in dumped
        assert base64.b64encode(planted.encode()).decode() not in dumped


# --- rows 1 and 2: ignore rules ---------------------------------------------------------------------


def test_row1_json_pointer_rule_ignores_replicas() -> None:
    engine = DriftEngine(
        IgnoreRules([IgnoreRule(group="apps", kind="Deployment", json_pointers=("/spec/replicas",))])
    )
    changes = analyse(inference_desired(), inference_live(), engine)
    assert changes["/spec/replicas"].cls == IGNORED
    assert changes[GPU].cls == HUMAN


def test_row1_jq_rule_ignores_injected_init_container() -> None:
    live = inference_live()
    live["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "injected-init-container", "image": "mesh:1"}
    ]
    expr = '.spec.template.spec.initContainers[] | select(.name == "injected-init-container")'
    rules = IgnoreRules([IgnoreRule(group="apps", kind="Deployment", jq_path_expressions=(expr,))])
    engine = DriftEngine(rules)
    try:
        changes = analyse(inference_desired(), live, engine)
    finally:
        rules.close()
    assert changes["/spec/template/spec/initContainers"].cls == IGNORED
    assert changes[GPU].cls == HUMAN


def test_row2_managed_fields_managers_rule() -> None:
    engine = DriftEngine(
        IgnoreRules([IgnoreRule(group="*", kind="*", managed_fields_managers=("kube-controller-manager",))])
    )
    replicas = analyse(inference_desired(), inference_live(), engine)["/spec/replicas"]
    assert replicas.cls == IGNORED and "managedFieldsManagers" in replicas.reason


def test_row2_slice_status_annotation_by_gpu_operator() -> None:
    desired = inference_desired()
    live = inference_live(patched=False, gpu="2")
    live["metadata"]["annotations"]["gpu.infra/slice-status"] = "sliced:2x20gb"
    live["metadata"]["managedFields"].append(
        {
            "manager": "gpu-slicer",
            "operation": "Update",
            "time": PATCH_TIME,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {"f:gpu.infra/slice-status": {}}}},
        }
    )
    plain = analyse(desired, live)
    # Git does not declare the annotation: Argo CD's three-way patch leaves it, the app stays
    # Synced, so an unknown writer is attributed but never alerted on (issue 17)
    slice_status = plain["/metadata/annotations/gpu.infra~1slice-status"]
    assert slice_status.cls == IGNORED and slice_status.actor and slice_status.actor.manager == "gpu-slicer"
    assert "Argo CD does not compare it" in slice_status.reason
    as_controller = analyse(
        desired,
        live,
        DriftEngine(policy=Policy(controllers=frozenset({"gpu-slicer", "kube-controller-manager"}))),
    )
    assert not [c for c in as_controller.values() if c.cls == HUMAN]
    assert as_controller["/metadata/annotations/gpu.infra~1slice-status"].cls == CONTROLLER


# --- rows 4 and 5: Argo CD owns the value -----------------------------------------------------------


def test_row5_git_moved_ahead_is_pending_sync() -> None:
    desired = inference_desired()
    desired["spec"]["template"]["spec"]["containers"][0]["image"] = (
        "registry.example.com/ai/deepseek-inference:1.9.0"
    )
    live = inference_live(patched=False, gpu="2")
    changes = analyse(desired, live)
    image = changes["/spec/template/spec/containers/0/image"]
    assert (
        image.cls == PENDING_SYNC and image.actor is not None and image.actor.manager == "argocd-controller"
    )
    assert not [c for c in changes.values() if c.cls == HUMAN]


def test_row4_field_owned_by_argo_not_in_git_is_admission_default() -> None:
    """Client-side apply by Argo CD (an Update) owns what a webhook injected at create."""
    desired = inference_desired()
    live = inference_live(patched=False, gpu="2")
    live["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"runAsNonRoot": True}
    argo = live["metadata"]["managedFields"][0]["fieldsV1"]
    argo["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"server"}']["f:securityContext"] = {
        "f:runAsNonRoot": {}
    }
    ctx = analyse(desired, live)["/spec/template/spec/containers/0/securityContext/runAsNonRoot"]
    assert ctx.cls == ADMISSION_DEFAULT


# --- row 6 on other kinds ---------------------------------------------------------------------------


def test_row6_kubectl_edit_on_a_configmap() -> None:
    desired = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "feature-flags", "namespace": "shop"},
        "data": {"checkout": "v1"},
    }
    live = copy.deepcopy(desired)
    live["data"]["checkout"] = "v2"
    live["metadata"]["managedFields"] = [
        {"manager": "argocd-controller", "operation": "Apply", "time": ARGO_TIME, "fieldsV1": {"f:data": {}}},
        {
            "manager": "kubectl-edit",
            "operation": "Update",
            "time": PATCH_TIME,
            "fieldsV1": {"f:data": {"f:checkout": {}}},
        },
    ]
    # Argo's entry owns f:data as a leaf-less map: kubectl-edit owns the key itself
    live["metadata"]["managedFields"][0]["fieldsV1"] = {"f:data": {".": {}}}
    change = analyse(desired, live)["/data/checkout"]
    assert change.cls == HUMAN and change.actor is not None and change.actor.manager == "kubectl-edit"


def test_row6_custom_resource_edited_from_a_dashboard() -> None:
    desired = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "payment", "namespace": "shop"},
        "spec": {"strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {"duration": "5m"}}]}}},
    }
    live = copy.deepcopy(desired)
    live["spec"]["strategy"]["canary"]["steps"][0]["setWeight"] = 100
    live["metadata"]["managedFields"] = [
        {
            "manager": "argocd-controller",
            "operation": "Apply",
            "time": ARGO_TIME,
            "fieldsV1": {"f:spec": {"f:strategy": {}}},
        },
        {
            "manager": "headlamp",
            "operation": "Update",
            "time": PATCH_TIME,
            "fieldsV1": {"f:spec": {"f:strategy": {"f:canary": {"f:steps": {}}}}},
        },
    ]
    change = analyse(desired, live)["/spec/strategy/canary/steps/0/setWeight"]
    assert change.cls == HUMAN and change.actor is not None and change.actor.manager == "headlamp"


# --- row 7: last-applied three-way ------------------------------------------------------------------


def _statefulset() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "redis", "namespace": "cache"},
        "spec": {
            "serviceName": "redis",
            "replicas": 3,
            "template": {"spec": {"containers": [{"name": "redis", "image": "redis:7.2"}]}},
        },
    }


def _with_last_applied(live: dict[str, Any], applied: dict[str, Any]) -> dict[str, Any]:
    live.setdefault("metadata", {}).setdefault("annotations", {})[
        "kubectl.kubernetes.io/last-applied-configuration"
    ] = json.dumps(applied)
    return live


@pytest.mark.parametrize(
    ("mutate_desired", "mutate_live", "path", "expected"),
    [
        (
            None,
            lambda s: s["spec"].__setitem__("podManagementPolicy", "OrderedReady"),
            "/spec/podManagementPolicy",
            ADMISSION_DEFAULT,
        ),
        (lambda s: s["spec"].pop("serviceName"), None, "/spec/serviceName", PENDING_SYNC),
        (lambda s: s["spec"].__setitem__("replicas", 5), None, "/spec/replicas", PENDING_SYNC),
        (None, lambda s: s["spec"].__setitem__("replicas", 1), "/spec/replicas", HUMAN),
        (lambda s: s["spec"].__setitem__("minReadySeconds", 10), None, "/spec/minReadySeconds", PENDING_SYNC),
        (None, lambda s: s["spec"].pop("serviceName"), "/spec/serviceName", HUMAN),
    ],
)
def test_row7_last_applied_three_way(mutate_desired: Any, mutate_live: Any, path: str, expected: str) -> None:
    applied = _statefulset()
    desired, live = _statefulset(), _statefulset()
    if mutate_desired:
        mutate_desired(desired)
    if mutate_live:
        mutate_live(live)
    _with_last_applied(live, applied)
    assert analyse(desired, live)[path].cls == expected


# --- row 8: managedFields present, nobody owns the path -------------------------------------------


def _service(managed: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    desired = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "payment", "namespace": "shop"},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}], "selector": {"app": "payment"}},
    }
    live = copy.deepcopy(desired)
    live["spec"]["clusterIP"] = "10.96.12.7"
    live["spec"]["ports"][0]["protocol"] = "TCP"
    live["metadata"]["managedFields"] = managed
    return desired, live


def test_row8_unowned_defaults_on_a_service() -> None:
    desired, live = _service(
        [
            {
                "manager": "argocd-controller",
                "operation": "Apply",
                "time": ARGO_TIME,
                "fieldsV1": {"f:spec": {"f:selector": {}}},
            }
        ]
    )
    changes = analyse(desired, live)
    assert changes["/spec/clusterIP"].cls == ADMISSION_DEFAULT
    assert changes["/spec/ports/0/protocol"].cls == ADMISSION_DEFAULT


def test_row8_removed_field_touched_after_argo_is_human() -> None:
    desired, live = _service(
        [
            {
                "manager": "argocd-controller",
                "operation": "Apply",
                "time": ARGO_TIME,
                "fieldsV1": {"f:spec": {"f:ports": {}}},
            },
            {
                "manager": "kubectl-edit",
                "operation": "Update",
                "time": PATCH_TIME,
                "fieldsV1": {"f:spec": {"f:ports": {}}},
            },
        ]
    )
    del live["spec"]["selector"]
    removed = analyse(desired, live)["/spec/selector"]
    assert removed.cls == HUMAN and removed.actor is not None and removed.actor.manager == "kubectl-edit"


def test_row8_removed_field_untouched_since_argo_is_pending_sync() -> None:
    desired, live = _service(
        [
            {
                "manager": "argocd-controller",
                "operation": "Apply",
                "time": ARGO_TIME,
                "fieldsV1": {"f:spec": {"f:ports": {}}},
            }
        ]
    )
    desired["spec"]["sessionAffinity"] = "ClientIP"
    assert analyse(desired, live)["/spec/sessionAffinity"].cls == PENDING_SYNC


# --- row 9: two-way ---------------------------------------------------------------------------------


def test_row9_two_way_without_managed_fields() -> None:
    desired = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "x"},
        "data": {"k": "1"},
    }
    live = copy.deepcopy(desired)
    live["data"]["k"] = "2"
    live["metadata"]["labels"] = {"injected": "yes"}
    changes = analyse(desired, live)
    assert changes["/data/k"].cls == HUMAN and changes["/data/k"].actor is None
    assert changes["/metadata/labels/injected"].cls == ADMISSION_DEFAULT


# --- whole resources and normalizations ------------------------------------------------------------


def test_missing_and_prune_candidate() -> None:
    d = inference_desired()
    [missing] = analyse(d, None).values()
    [prune] = analyse(None, d).values()
    assert (missing.cls, prune.cls) == (MISSING, PRUNE_CANDIDATE)


def test_argo_normalizations_report_nothing() -> None:
    engine = DriftEngine()
    desired = inference_desired()
    desired["metadata"]["creationTimestamp"] = None
    desired["spec"]["template"]["metadata"]["creationTimestamp"] = None
    live = inference_live(gpu="2", replicas=3, pull_policy=False, patched=False)
    assert engine.resource(resource_key(desired), desired, live).alerting == []
    secret_d = secret_desired("same")
    secret_l = secret_live(base64.b64encode(b"same").decode())
    assert engine.resource(resource_key(secret_d), secret_d, secret_l).changes == []
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "r", "namespace": "x"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": []}],
    }
    role_live = copy.deepcopy(role)
    del role_live["rules"][0]["resourceNames"]
    assert engine.resource(resource_key(role), role, role_live).changes == []
    ep = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "e", "namespace": "x"},
        "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}],
    }
    ep_live = copy.deepcopy(ep)
    ep_live["subsets"][0]["addresses"].reverse()
    assert engine.resource(resource_key(ep), ep, ep_live).changes == []


def test_managed_resources_null_states() -> None:
    d = inference_desired()
    items = [
        {
            "group": "apps",
            "kind": "Deployment",
            "namespace": "ai-serving",
            "name": "a",
            "targetState": json.dumps(d),
            "liveState": "null",
            "predictedLiveState": "null",
            "normalizedLiveState": "null",
        },
        {
            "group": "apps",
            "kind": "Deployment",
            "namespace": "ai-serving",
            "name": "b",
            "targetState": "null",
            "liveState": json.dumps(d),
            "normalizedLiveState": json.dumps(d),
        },
        {
            "group": "batch",
            "kind": "Job",
            "namespace": "ai-serving",
            "name": "hook",
            "hook": True,
            "targetState": "null",
            "liveState": json.dumps(d),
        },
    ]
    statuses = [r.status for r in DriftEngine().managed_resources(items)]
    assert statuses == [MISSING, PRUNE_CANDIDATE]


def test_docs_carry_the_decision_table_of_the_code() -> None:
    import driftguard.drift as module

    doc = (Path(__file__).resolve().parents[2] / "docs" / "drift-engine.md").read_text()
    table = (module.__doc__ or "")[(module.__doc__ or "").index("Decision table") :]
    assert table.strip() in doc

"""Realistic-shaped Kubernetes objects for drift tests (managedFields as the API server writes them)."""

from __future__ import annotations

import copy
import json
from typing import Any

ARGO_TIME = "2026-11-29T13:55:00Z"
HPA_TIME = "2026-11-29T14:01:30Z"
PATCH_TIME = "2026-11-29T14:02:07Z"


def inference_desired() -> dict[str, Any]:
    """The Deployment as Git renders it: 2 GPUs, 3 replicas."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "deepseek-inference",
            "namespace": "ai-serving",
            "labels": {"app.kubernetes.io/name": "deepseek-inference"},
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "deepseek-inference"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "deepseek-inference"}},
                "spec": {
                    "containers": [
                        {
                            "name": "server",
                            "image": "registry.example.com/ai/deepseek-inference:1.8.2",
                            "env": [{"name": "MODEL", "value": "deepseek-r1"}],
                            "resources": {"limits": {"nvidia.com/gpu": "2", "memory": "64Gi"}},
                        }
                    ]
                },
            },
        },
    }


def _argo_fields() -> dict[str, Any]:
    return {
        "f:metadata": {"f:labels": {"f:app.kubernetes.io/name": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app.kubernetes.io/name": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"server"}': {
                            ".": {},
                            "f:env": {'k:{"name":"MODEL"}': {".": {}, "f:name": {}, "f:value": {}}},
                            "f:image": {},
                            "f:name": {},
                            "f:resources": {"f:limits": {"f:memory": {}, "f:nvidia.com/gpu": {}}},
                        }
                    }
                },
            },
        },
    }


def inference_live(
    *, gpu: str = "4", replicas: int = 5, pull_policy: bool = True, patched: bool = True
) -> dict[str, Any]:
    """The live Deployment after the drill: GPU 2->4 by kubectl-patch, replicas by the HPA, defaults filled."""
    live = copy.deepcopy(inference_desired())
    live["metadata"].update(
        {
            "uid": "8a1f0c8e-1111-4d7e-9e55-0a0b0c0d0e0f",
            "resourceVersion": "918273",
            "generation": 7,
            "creationTimestamp": "2026-11-20T08:00:00Z",
            "annotations": {"deployment.kubernetes.io/revision": "4"},
        }
    )
    container = live["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = gpu
    if pull_policy:
        container["imagePullPolicy"] = "IfNotPresent"
        container["terminationMessagePath"] = "/dev/termination-log"
    live["spec"]["replicas"] = replicas
    live["spec"]["revisionHistoryLimit"] = 10
    live["status"] = {"replicas": replicas, "readyReplicas": replicas}
    argo = _argo_fields()
    managed: list[dict[str, Any]] = [
        {
            "manager": "argocd-controller",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": ARGO_TIME,
            "fieldsType": "FieldsV1",
            "fieldsV1": argo,
        },
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "time": HPA_TIME,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:annotations": {".": {}, "f:deployment.kubernetes.io/revision": {}}},
            },
        },
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "autoscaling/v1",
            "time": HPA_TIME,
            "subresource": "scale",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}},
        },
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "time": HPA_TIME,
            "subresource": "status",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:replicas": {}, "f:readyReplicas": {}}},
        },
    ]
    # the HPA's scale write took spec.replicas away from Argo CD
    del argo["f:spec"]["f:replicas"]
    if patched:
        limits = argo["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"server"}']["f:resources"][
            "f:limits"
        ]
        del limits["f:nvidia.com/gpu"]
        managed.append(
            {
                "manager": "kubectl-patch",
                "operation": "Update",
                "apiVersion": "apps/v1",
                "time": PATCH_TIME,
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:spec": {
                        "f:template": {
                            "f:spec": {
                                "f:containers": {
                                    'k:{"name":"server"}': {
                                        "f:resources": {"f:limits": {"f:nvidia.com/gpu": {}}}
                                    }
                                }
                            }
                        }
                    }
                },
            }
        )
    live["metadata"]["managedFields"] = managed
    return live


def secret_desired(password: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "inference-db", "namespace": "ai-serving"},
        "type": "Opaque",
        "stringData": {"password": password},
    }


def secret_live(encoded: str, *, manager: str = "kubectl-edit") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "inference-db",
            "namespace": "ai-serving",
            "managedFields": [
                {
                    "manager": "argocd-controller",
                    "operation": "Apply",
                    "time": ARGO_TIME,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:type": {}},
                },
                {
                    "manager": manager,
                    "operation": "Update",
                    "time": PATCH_TIME,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:password": {}}},
                },
            ],
        },
        "type": "Opaque",
        "data": {"password": encoded},
    }


def managed_item(desired: dict[str, Any] | None, live: dict[str, Any] | None) -> dict[str, Any]:
    """One item of Argo CD's managed-resources answer (states are JSON strings, "null" when absent)."""
    obj = desired or live
    assert obj is not None
    group = obj["apiVersion"].rpartition("/")[0]
    return {
        "group": group,
        "kind": obj["kind"],
        "namespace": obj["metadata"].get("namespace", ""),
        "name": obj["metadata"]["name"],
        "targetState": json.dumps(desired),
        "liveState": json.dumps(live),
        "normalizedLiveState": json.dumps(live),
        "predictedLiveState": json.dumps(desired),
        "modified": desired != live,
        "hook": False,
        "resourceVersion": (live or {}).get("metadata", {}).get("resourceVersion", ""),
    }


def serve_drill(
    fake: Any,
    *,
    patched: bool = True,
    secret_changed: bool = True,
    sync: str = "OutOfSync",
    secret: tuple[str, str] = ("db-PLANTED-password", "rotated-PLANTED-secret"),
    ignore_replicas: bool = False,
    name: str = "deepseek-inference",
) -> None:
    """Put the drill on an Argo CD stand-in: the Application and its managed resources.

    ``patched``: the GPU limit is 4 by kubectl-patch (else 2, as Git says); ``secret_changed``: the
    Secret holds ``secret[1]`` by kubectl-edit (else ``secret[0]``, as Git says); replicas by the
    HPA and server defaults are always there.
    """
    import base64

    from standins.argo_api import application

    app = application(
        name,
        resources=[
            ("apps", "Deployment", "ai-serving", "deepseek-inference"),
            ("", "Secret", "ai-serving", "inference-db"),
        ],
        sync=sync,
        dest_namespace="ai-serving",
    )
    app["spec"]["destination"]["name"] = "gpu-prod-1"
    if ignore_replicas:
        app["spec"]["ignoreDifferences"] = [
            {"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]}
        ]
    if sync == "Synced":
        app["status"]["operationState"] = {
            "phase": "Succeeded",
            "message": "successfully synced (all tasks run)",
        }
    fake.put(app)
    live = inference_live(patched=patched, gpu="4" if patched else "2")
    held = secret[1] if secret_changed else secret[0]
    fake.managed[("argocd", name)] = {
        "items": [
            managed_item(inference_desired(), live),
            managed_item(secret_desired(secret[0]), secret_live(base64.b64encode(held.encode()).decode())),
        ]
    }

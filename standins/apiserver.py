"""kube-apiserver's side of identity: the audit Events and AdmissionReviews it sends, in their real shapes.

Shapes from the Kubernetes API reference: ``audit.k8s.io/v1`` Event/EventList
(kubernetes/website content/en/docs/reference/config-api/apiserver-audit.v1.md) and
``admission.k8s.io/v1`` AdmissionReview (.../extend-kubernetes/admission-webhooks). At Metadata
level an Event has no requestObject/responseObject; we add them in tests to prove they are not kept.
"""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime
from typing import Any

__all__ = ["admission_review", "audit_event", "event_list", "rfc3339_micro"]


def rfc3339_micro(t: float) -> str:
    """A MicroTime as the API server writes it: ``2026-11-29T14:02:07.123456Z``."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def audit_event(
    *,
    at: float,
    user: str = "alice@example.com",
    groups: tuple[str, ...] = ("sre", "system:authenticated"),
    verb: str = "patch",
    group: str = "apps",
    resource: str = "deployments",
    namespace: str = "ai-serving",
    name: str = "deepseek-inference",
    field_manager: str | None = "kubectl-patch",
    user_agent: str = "kubectl/v1.31.2 (linux/amd64) kubernetes/5864a46",
    code: int = 200,
    stage: str = "ResponseComplete",
    uid: str = "",
    resource_version: str = "",
) -> dict[str, Any]:
    """One Event for a write, as the webhook backend batches it (kubectl sends ``?fieldManager=kubectl-patch``)."""
    base = f"/apis/{group}/v1" if group else "/api/v1"
    uri = f"{base}/namespaces/{namespace}/{resource}/{name}"
    if field_manager:
        uri += f"?fieldManager={field_manager}"
    ref: dict[str, Any] = {
        "resource": resource,
        "namespace": namespace,
        "name": name,
        "apiGroup": group,
        "apiVersion": "v1",
    }
    if uid:
        ref["uid"] = uid
    if resource_version:
        ref["resourceVersion"] = resource_version
    return {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": str(uuid.uuid4()),
        "stage": stage,
        "requestURI": uri,
        "verb": verb,
        "user": {"username": user, "uid": str(uuid.uuid4()), "groups": list(groups)},
        "sourceIPs": ["203.0.113.7"],
        "userAgent": user_agent,
        "objectRef": ref,
        "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": rfc3339_micro(at - 0.02),
        "stageTimestamp": rfc3339_micro(at),
        "annotations": {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""},
    }


def event_list(*events: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": {}, "items": list(events)}


def admission_review(
    obj: dict[str, Any],
    *,
    user: str = "alice@example.com",
    groups: tuple[str, ...] = ("sre", "system:authenticated"),
    operation: str = "UPDATE",
    field_manager: str = "kubectl-patch",
    old: dict[str, Any] | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """The review a validating webhook gets for a write of ``obj`` (a patch arrives as UPDATE with PatchOptions)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    kind = obj["kind"]
    resource = kind.lower() + "s"
    meta = obj["metadata"]
    options_kind = {"CREATE": "CreateOptions", "DELETE": "DeleteOptions"}.get(operation, "PatchOptions")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "operation": operation,
            "userInfo": {"username": user, "uid": str(uuid.uuid4()), "groups": list(groups)},
            "object": None if operation == "DELETE" else copy.deepcopy(obj),
            "oldObject": copy.deepcopy(old or obj) if operation != "CREATE" else None,
            "dryRun": dry_run,
            "options": {"kind": options_kind, "apiVersion": "meta.k8s.io/v1", "fieldManager": field_manager},
        },
    }

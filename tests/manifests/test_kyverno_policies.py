"""The GitOps kit's Kyverno policies against Kyverno v1.19.0's real ClusterPolicy CRD."""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import jsonschema
import pytest

from .reference import ROOT, kustomize, validate

KIT = ROOT / "examples" / "gitops-kit" / "kyverno"


@functools.cache
def _objects() -> tuple[dict[str, Any], ...]:
    return tuple(kustomize(KIT))


def objects() -> list[dict[str, Any]]:
    return copy.deepcopy(list(_objects()))


def policy(name: str) -> dict[str, Any]:
    [found] = [o for o in objects() if o["kind"] == "ClusterPolicy" and o["metadata"]["name"] == name]
    return found


def test_every_policy_fits_the_clusterpolicy_crd() -> None:
    policies = [o for o in objects() if o["kind"] == "ClusterPolicy"]
    assert len(policies) == 2
    for p in policies:
        validate(p, "kyverno/clusterpolicy-crd.yaml", "v1")


def test_the_crd_check_would_catch_a_typo() -> None:
    p = policy("driftguard-require-deletion-confirmation")
    p["spec"]["rules"][0]["validate"]["failureAction"] = "Enforced"
    with pytest.raises(jsonschema.ValidationError):
        validate(p, "kyverno/clusterpolicy-crd.yaml", "v1")


def test_deletions_in_protected_namespaces_need_the_annotation() -> None:
    p = policy("driftguard-require-deletion-confirmation")
    rules = {r["name"]: r for r in p["spec"]["rules"]}
    workload = rules["deletion-needs-confirmation"]
    [match] = workload["match"]["any"]
    assert match["resources"]["operations"] == ["DELETE"]
    assert match["resources"]["namespaceSelector"] == {"matchLabels": {"driftguard.io/protected": "true"}}
    assert {"apps/v1/Deployment", "v1/PersistentVolumeClaim", "v1/Service"} <= set(
        match["resources"]["kinds"]
    )
    assert workload["validate"]["failureAction"] == "Enforce"
    [cond] = workload["validate"]["deny"]["conditions"]["any"]
    # on DELETE the object is request.oldObject (request.object is null)
    assert cond["key"] == "{{ request.oldObject.metadata.annotations.\"deletion-confirmed-by\" || '' }}"
    assert (cond["operator"], cond["value"]) == ("Equals", "")
    ns_rule = rules["protected-namespace-deletion-needs-confirmation"]
    assert ns_rule["match"]["any"][0]["resources"]["kinds"] == ["v1/Namespace"]
    assert p["spec"]["background"] is False  # DELETE requests cannot be evaluated in background scans


def test_more_than_three_deployment_deletions_in_five_minutes_are_refused() -> None:
    p = policy("driftguard-limit-deployment-deletions")
    rules = {r["name"]: r for r in p["spec"]["rules"]}
    limit = rules["at-most-3-deployment-deletions-in-5-minutes"]
    ctx = {c["name"]: c["apiCall"] for c in limit["context"]}
    assert "-5m" in ctx["ledger"]["jmesPath"]
    assert "labelSelector=driftguard.io%2Fdeletion-ledger%3Ddeployment" in ctx["ledger"]["urlPath"]
    assert "deletionTimestamp" in ctx["terminating"]["jmesPath"]
    [cond] = limit["validate"]["deny"]["conditions"]["any"]
    # three already gone in the window: the fourth is refused
    assert (cond["operator"], cond["value"]) == ("GreaterThanOrEquals", 3)
    record = rules["record-deployment-deletion"]["generate"]
    labels = record["data"]["metadata"]["labels"]
    assert labels == {"driftguard.io/deletion-ledger": "deployment", "cleanup.kyverno.io/ttl": "5m"}
    # the ledger entry the generate rule writes is what the apiCall selects
    selector = re.search(r"labelSelector=([^&]+)", ctx["ledger"]["urlPath"])
    assert (
        selector
        and selector.group(1).replace("%2F", "/").replace("%3D", "=")
        == "driftguard.io/deletion-ledger=deployment"
    )


def test_kyverno_may_do_what_the_policies_ask() -> None:
    roles = {
        o["metadata"]["labels"].popitem()[0]: o["rules"] for o in objects() if o["kind"] == "ClusterRole"
    }
    admission = roles["rbac.kyverno.io/aggregate-to-admission-controller"]
    assert {"list"} <= set(admission[0]["verbs"]) and admission[0]["resources"] == ["configmaps"]
    assert admission[1]["resources"] == ["deployments"]
    assert "create" in roles["rbac.kyverno.io/aggregate-to-background-controller"][0]["verbs"]
    assert "delete" in roles["rbac.kyverno.io/aggregate-to-cleanup-controller"][0]["verbs"]

"""Template views of realistic reports for channel tests."""

from __future__ import annotations

from typing import Any

from driftguard.diff import FieldChange
from driftguard.drift import HUMAN, Actor, Classified, ResourceDrift
from driftguard.manifests import ResourceKey
from driftguard.report import AppInfo, DriftReport
from notifier.render import view


def report(n: int) -> DriftReport:
    drifts = []
    for i in range(n):
        key = ResourceKey("apps", "Deployment", "shop", f"api-{i}")
        change = FieldChange(
            "/spec/template/spec/containers/0/image",
            "replace",
            f"registry.example.com/api:{i}",
            f"registry.example.com/api:{i}-hotfix",
        )
        drifts.append(
            ResourceDrift(
                key,
                "modified",
                [Classified(key, change, HUMAN, Actor("kubectl-set", "Update", "2026-11-29T14:02:07Z"))],
            )
        )
    return DriftReport(
        AppInfo(
            "shop-api",
            project="shop",
            cluster="prod-1",
            destination_namespace="shop",
            revision="a" * 40,
            sync_status="OutOfSync",
        ),
        drifts,
    )


def small_view() -> dict[str, Any]:
    return view(report(1), link="https://argocd.example.com/applications/argocd/shop-api")


def big_view(n: int) -> dict[str, Any]:
    return view(report(n), link="https://argocd.example.com/applications/argocd/shop-api")

"""The freeze gate asks Argo CD's CanSync question: manual syncs, andOperator, cluster name or server."""

from __future__ import annotations

from typing import Any

from flask import Flask

from standins.argo_api import FakeArgo, application

from .conftest import get


def with_windows(argo: FakeArgo, windows: list[dict[str, Any]]) -> None:
    argo.projects["shop"] = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AppProject",
        "metadata": {"name": "shop", "namespace": "argocd"},
        "spec": {"syncWindows": windows},
    }
    a = application("checkout")
    a["spec"]["project"] = "shop"
    a["spec"]["destination"] = {
        "name": "prod-eu",
        "server": "https://prod-eu.example.com",
        "namespace": "shop",
    }
    argo.put(a)


def verdict(app: Flask, query: str = "") -> dict[str, Any]:
    body: dict[str, Any] = get(app, f"/v1/gates/freeze?app=checkout{query}").get_json()
    return body


def test_manual_sync_passes_a_manual_sync_window_and_automated_does_not(app: Flask, argo: FakeArgo) -> None:
    always = {"kind": "deny", "schedule": "* * * * *", "duration": "1h", "clusters": ["prod-*"]}
    with_windows(argo, [{**always, "manualSync": True}])
    assert verdict(app)["verdict"] == "fail"
    body = verdict(app, "&manualSync=true")
    assert body["verdict"] == "pass" and body["observed"]["manualSync"] is True
    with_windows(argo, [always])  # manualSync not set: a manual sync is held too
    assert verdict(app, "&manualSync=true")["verdict"] == "fail"
    assert get(app, "/v1/gates/freeze?app=checkout&manualSync=maybe").status_code == 400


def test_cluster_by_server_and_and_operator(app: Flask, argo: FakeArgo) -> None:
    deny = {"kind": "deny", "schedule": "* * * * *", "duration": "1h"}
    with_windows(argo, [{**deny, "clusters": ["https://prod-eu.example.com"]}])
    assert verdict(app)["verdict"] == "fail"  # matched on the destination's server
    with_windows(argo, [{**deny, "clusters": ["prod-eu"], "applications": ["other"], "andOperator": True}])
    assert verdict(app)["verdict"] == "pass"  # AND: the application does not match
    with_windows(argo, [{**deny, "clusters": ["prod-eu"], "applications": ["other"]}])
    assert verdict(app)["verdict"] == "fail"  # OR: the cluster does


def test_a_schedule_argo_refuses_is_not_a_pass(app: Flask, argo: FakeArgo) -> None:
    with_windows(argo, [{"kind": "deny", "schedule": "@daily", "duration": "1h", "applications": ["*"]}])
    resp = get(app, "/v1/gates/freeze?app=checkout")
    # a non-2xx: Rollouts counts it as an Error, never as a pass
    assert resp.status_code == 502 and "does not accept descriptors" in resp.get_json()["error"]

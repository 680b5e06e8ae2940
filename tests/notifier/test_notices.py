"""Issue 30: a refused render is one message with its prune summary and cause; other ComparisonErrors
say what they are; one Git removal is one message per channel; PagerDuty incidents per kind."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask import Flask
from hypothesis import given, settings
from hypothesis import strategies as st

from driftguard.cause import unwrap
from notifier.alerts.notices import label_of
from standins.argo_api import FakeArgo, application
from standins.drill import managed_item
from standins.receivers import Receivers
from tests.helpers import examples
from tests.notifier.test_webhook import _shipped_body

from .conftest import post

# as Argo CD v3.5.1 stores the CMP's refusal: controller/state.go wraps the repo-server's error,
# reposerver/repository/repository.go and cmpserver/plugin/plugin.go theirs (driftguard/cause.py)
WRAP = (
    "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown"
    " desc = plugin sidecar failed. error generating manifests in cmp: rpc error: code = Unknown desc ="
    " `driftguard-cmp generate` failed exit status 3: "
)
REFUSAL = (
    "driftguard: refused by shrink: the render would prune 1638 of 1638 resources (412 Deployment,"
    " 1140 Service, 86 PersistentVolumeClaim)\n"
    "driftguard: gating key `enabled` relies on the chart default (templates/deployment.yaml:1)\n"
    "fix: set enabled in this environment's values, or approve the shrink"
)
GIT_AUTH = (
    "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown"
    " desc = failed to list refs: authentication required: Invalid username or password"
)


def postmortem_app(message: str) -> dict[str, Any]:
    """The 412-Deployment case: the render refused, Argo CD marks every live resource requiresPruning."""
    resources = (
        [("apps", "Deployment", f"ns-{i % 64}", f"svc-{i}") for i in range(412)]
        + [("", "Service", f"ns-{i % 64}", f"svc-{i}") for i in range(1140)]
        + [("", "PersistentVolumeClaim", f"ns-{i % 64}", f"data-{i}") for i in range(86)]
    )
    app = application("payments-prod", resources=resources, sync="Unknown", dest_namespace="payments")
    for r in app["status"]["resources"]:
        r["requiresPruning"] = True
        r["status"] = "OutOfSync"
    app["status"]["conditions"] = [
        {"type": "ComparisonError", "message": message, "lastTransitionTime": "2026-11-29T14:00:00Z"}
    ]
    return app


def test_the_412_deployment_refusal_is_one_message_per_channel_with_its_prune_summary(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    refused = postmortem_app(WRAP + REFUSAL)
    argo.put(refused)
    argo.managed[("argocd", "payments-prod")] = {"items": []}
    assert post(app.test_client(), _shipped_body("on-render-refused", refused)).status_code == 202
    app.extensions["driftguard"].worker.drain()
    assert [len(rx.on(p)) for p in ("/feishu", "/slack", "/pagerduty")] == [1, 1, 1]
    slack = json.loads(rx.on("/slack")[0].body)
    text = "\n".join(b["text"]["text"] for b in slack["blocks"] if b["type"] == "section")
    assert slack["blocks"][0]["text"]["text"] == "Render refused by driftguard: payments-prod"
    # the refusal starts with driftguard's own line, no rpc wrapping, its line breaks kept
    assert "```\ndriftguard: refused by shrink: the render would prune 1638" in text
    assert "rpc error" not in text and "Failed to load target state" not in text
    assert "\nfix: set enabled" in text
    # the prune summary: protected kinds first, named
    summary = text[text.index("Would be pruned if it synced now") :]
    assert summary.index("86 `PersistentVolumeClaim` (protected)") < summary.index("1140 `Service`")
    assert summary.index("1140 `Service`") < summary.index("412 `Deployment`")
    assert "`PersistentVolumeClaim ns-0/data-0`" in summary
    first_named = next(line for line in summary.splitlines() if line.startswith("• `"))
    assert first_named.startswith("• `PersistentVolumeClaim ")
    assert any(b["type"] == "actions" for b in slack["blocks"])  # the link to Argo CD
    card = json.loads(rx.on("/feishu")[0].body)["card"]
    assert card["header"]["title"]["content"] == "driftguard 拒绝渲染：payments-prod"
    feishu = "\n".join(e.get("content", "") for e in card["body"]["elements"])
    assert (
        "PersistentVolumeClaim 86 个（受保护类型）" in feishu and "\ndriftguard: refused by shrink" in feishu
    )
    pd = rx.on("/pagerduty")[0].json()
    assert pd["dedup_key"] == "driftguard/argocd/payments-prod/render"
    assert pd["payload"]["custom_details"]["counts"]["PersistentVolumeClaim"] == 86
    assert pd["links"][0]["href"].endswith("/applications/argocd/payments-prod")


def test_a_git_failure_is_labelled_as_one_with_argo_cds_text(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    failed = postmortem_app(GIT_AUTH)
    argo.put(failed)
    argo.managed[("argocd", "payments-prod")] = {"items": []}
    assert post(app.test_client(), _shipped_body("on-render-refused", failed)).status_code == 202
    app.extensions["driftguard"].worker.drain()
    slack = json.loads(rx.on("/slack")[0].body)
    assert slack["blocks"][0]["text"]["text"] == "Git error: payments-prod"
    text = json.dumps(slack)
    assert "Render refused" not in text and "authentication required" in text and "Git access failed" in text
    assert "Git 访问失败" in rx.on("/feishu")[0].body.decode()


def test_pagerduty_resolves_each_kind_on_its_own_condition(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    """A render incident resolves when the ComparisonError is gone, a sync incident when no operation failed."""
    refused = postmortem_app(WRAP + REFUSAL)
    refused["status"]["operationState"] = {
        "phase": "Failed",
        "message": "one or more objects failed to apply",
        "startedAt": "2026-11-29T13:00:00Z",
        "finishedAt": "2026-11-29T13:00:05Z",
        "operation": {"sync": {"revision": "abc"}},
    }
    argo.put(refused)
    argo.managed[("argocd", "payments-prod")] = {"items": []}
    client = app.test_client()
    w = app.extensions["driftguard"].worker
    post(client, _shipped_body("on-sync-failed", refused))
    post(client, _shipped_body("on-render-refused", refused))
    w.drain()
    keys = [c.json()["dedup_key"] for c in rx.on("/pagerduty")]
    assert sorted(keys) == ["driftguard/argocd/payments-prod/render", "driftguard/argocd/payments-prod/sync"]
    fixed = application("payments-prod", sync="Synced", dest_namespace="payments")
    fixed["status"]["operationState"] = refused["status"]["operationState"]  # the failed sync stays the last
    argo.put(fixed)
    post(client, _shipped_body("on-drift-resolved", fixed))
    w.drain()
    resolves = [c.json() for c in rx.on("/pagerduty") if c.json()["event_action"] == "resolve"]
    assert [r["dedup_key"] for r in resolves] == ["driftguard/argocd/payments-prod/render"]


def test_one_git_removal_with_prune_off_is_one_message_per_channel(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    """Argo CD fires on-drift-detected and on-prune-pending for it; both read the same prune candidates."""
    live = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "old-config", "namespace": "shop", "uid": "u-1", "resourceVersion": "7"},
        "data": {"a": "1"},
    }
    removed = application("shop", resources=[("", "ConfigMap", "shop", "old-config")], sync="OutOfSync")
    removed["status"]["resources"][0]["requiresPruning"] = True
    argo.put(removed)
    argo.managed[("argocd", "shop")] = {"items": [managed_item(None, live)]}
    client = app.test_client()
    post(client, _shipped_body("on-drift-detected", removed))
    post(client, _shipped_body("on-prune-pending", removed))
    app.extensions["driftguard"].worker.drain()
    assert [len(rx.on(p)) for p in ("/feishu", "/slack")] == [1, 1]
    assert "old-config" in rx.on("/slack")[0].body.decode()


def test_no_notice_lists_nothing(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    """With automated prune the resources are gone by the time the notifier reads: no "would be deleted: -"."""
    gone = application("shop", sync="Synced")
    argo.put(gone)
    argo.managed[("argocd", "shop")] = {"items": []}
    body = _shipped_body("on-prune-pending", gone)
    post(app.test_client(), body)
    app.extensions["driftguard"].worker.drain()
    assert rx.captured == []


@pytest.mark.parametrize(
    ("message", "label"),
    [
        (WRAP + REFUSAL, "refused"),
        (GIT_AUTH, "git"),
        (
            'Failed to load target state: failed to get cluster info for "https://10.0.0.1": the server has asked'
            " for the client to provide credentials",
            "cluster",
        ),
        (
            "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown"
            " desc = Manifest generation error (cached): `helm template . --name-template x` failed exit status 1:"
            " Error: parse error at (x/templates/a.yaml:3)",
            "repository",
        ),
        ("rpc error: code = Unknown desc = Unable to resolve 'main' to a commit SHA", "git"),
        ("the app ran into something nobody classified", "other"),
    ],
)
def test_comparison_errors_are_labelled_as_what_they_are(message: str, label: str) -> None:
    assert label_of(message) == label


@settings(max_examples=examples(200), deadline=None)
@given(
    wraps=st.lists(
        st.sampled_from(
            [
                "Failed to load target state: ",
                "failed to generate manifest for source 1 of 2: ",
                "rpc error: code = Unknown desc = ",
                "error generating manifests in cmp: ",
                "plugin sidecar failed. ",
                "`driftguard-cmp generate` failed exit status 3: ",
            ]
        ),
        max_size=6,
    ),
    tail=st.lists(
        st.text(st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc")), max_size=40), max_size=4
    ),
)
def test_unwrap_leaves_the_tools_own_first_line_and_every_line_break(
    wraps: list[str], tail: list[str]
) -> None:
    """Reference: Argo CD prepends its prefixes to the first line only (controller/state.go and the
    repo-server's wrappers); the CMP's stderr follows unchanged."""
    own = "driftguard: refused by empty: the render produced 0 resources"
    lines = [line for line in tail if line.strip()]
    message = "".join(wraps) + own + "".join("\n" + line for line in lines)
    out = unwrap(message)
    assert out.splitlines()[0] == own
    assert out.count("\n") == len(lines)

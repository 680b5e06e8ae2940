"""The shipped triggers, run as Argo CD runs them: expr conditions over Application shapes that fit
Argo CD's real CRD, and notifications-engine's once-per-episode bookkeeping."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
import yaml

from notifier.alerts.notices import NOTICE_TRIGGERS
from notifier.webhook import canonical_trigger
from notifier.webhook import validate as validate_body
from standins.argo_api import application

from .expr import ExprError, evaluate
from .reference import crd_schema
from .test_notifier_manifests import go_template, patched_cm

TRIGGERS = (
    "driftguard-on-drift-detected",
    "driftguard-on-drift-resolved",
    "driftguard-on-sync-failed",
    "driftguard-on-render-refused",
    "driftguard-on-prune-pending",
)
REFUSAL = (
    "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown"
    " desc = plugin sidecar failed. refused by empty-output: the render produced 0 resources\n"
    "fix: set allowEmpty in the plugin parameters if this is intended"
)


def _op(phase: str, *, message: str = "", resources: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operation": {"sync": {"revision": "0123456789abcdef0123456789abcdef01234567"}},
        "phase": phase,
        "startedAt": "2026-11-29T14:00:00Z",
        "message": message,
    }
    if resources is not None:
        op["syncResult"] = {"revision": "0123456789abcdef0123456789abcdef01234567", "resources": resources}
    return op


def shape(name: str) -> dict[str, Any]:
    """Application objects as Argo CD stores them, one per situation the triggers must tell apart."""
    app = application("shop", resources=[("apps", "Deployment", "shop", "api")], dest_namespace="shop")
    status = app["status"]
    if name == "no-status":
        del app["status"]
    elif name == "empty-status":
        app["status"] = {}
    elif name == "synced":
        status["operationState"] = _op("Succeeded", message="successfully synced (all tasks run)")
    elif name.startswith("out-of-sync"):
        status["sync"]["status"] = "OutOfSync"
        status["health"]["status"] = {"out-of-sync": "Healthy", "out-of-sync-degraded": "Degraded"}[name]
    elif name == "sync-running":
        status["sync"]["status"] = "OutOfSync"
        status["operationState"] = _op("Running", message="waiting for healthy state of apps/Deployment/api")
    elif name in ("sync-failed", "sync-error"):
        status["sync"]["status"] = "OutOfSync"
        status["operationState"] = _op(
            "Failed" if name == "sync-failed" else "Error",
            message="one or more objects failed to apply, reason: admission webhook denied the request",
            resources=[
                {
                    "group": "apps",
                    "version": "v1",
                    "kind": "Deployment",
                    "namespace": "shop",
                    "name": "api",
                    "status": "SyncFailed",
                    "message": "admission webhook denied the request",
                }
            ],
        )
    elif (
        name == "reverted-after-failed-sync"
    ):  # a person put it back by hand; the last operation stays Failed
        status["operationState"] = _op("Failed", message="one or more objects failed to apply")
    elif name in ("render-refused", "render-refused-pruning"):
        status["sync"]["status"] = "Unknown"
        status["conditions"] = [
            {"type": "ComparisonError", "message": REFUSAL, "lastTransitionTime": "2026-11-29T14:00:00Z"}
        ]
        if name == "render-refused-pruning":
            # Argo CD marks every live resource requiresPruning when no target could be loaded
            # (controller/state.go v3.5.1: failedToLoadObjs, RequiresPruning = targetObj == nil && liveObj != nil)
            for r in status["resources"]:
                r["requiresPruning"] = True
    elif name == "other-condition":
        status["conditions"] = [{"type": "SharedResourceWarning", "message": "shared with another app"}]
    elif name == "requires-pruning":
        status["sync"]["status"] = "OutOfSync"
        status["resources"].append(
            {
                "version": "v1",
                "kind": "Service",
                "namespace": "shop",
                "name": "old",
                "status": "OutOfSync",
                "requiresPruning": True,
            }
        )
    elif name == "prune-skipped":
        status["operationState"] = _op(
            "Succeeded",
            resources=[
                {
                    "group": "",
                    "version": "v1",
                    "kind": "Service",
                    "namespace": "shop",
                    "name": "old",
                    "status": "PruneSkipped",
                    "message": "ignored (requires pruning)",
                }
            ],
        )
    else:
        raise KeyError(name)
    return app


#: which triggers hold in which situation (the rest must not)
EXPECTED = {
    "no-status": set(),
    "empty-status": set(),
    "synced": {"driftguard-on-drift-resolved"},
    "out-of-sync": {"driftguard-on-drift-detected"},
    "out-of-sync-degraded": {"driftguard-on-drift-detected"},
    "sync-running": {"driftguard-on-drift-detected"},
    "sync-failed": {"driftguard-on-drift-detected", "driftguard-on-sync-failed"},
    "sync-error": {"driftguard-on-drift-detected", "driftguard-on-sync-failed"},
    "reverted-after-failed-sync": {"driftguard-on-drift-resolved", "driftguard-on-sync-failed"},
    "render-refused": {"driftguard-on-render-refused"},
    "render-refused-pruning": {"driftguard-on-render-refused"},  # one message: the prune summary rides in it
    "other-condition": {"driftguard-on-drift-resolved"},
    "requires-pruning": {"driftguard-on-drift-detected", "driftguard-on-prune-pending"},
    "prune-skipped": {"driftguard-on-drift-resolved", "driftguard-on-prune-pending"},
}


@functools.cache
def _validator() -> Any:
    schema = crd_schema("argo-cd/application-crd.yaml", "v1alpha1")
    return jsonschema.validators.validator_for(schema)(schema)


def validate(app: dict[str, Any]) -> None:
    """Raise when ``app`` does not fit Argo CD's real Application CRD (tests/reference)."""
    _validator().validate(app)


@pytest.fixture(scope="module")
def cm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return patched_cm(tmp_path_factory.mktemp("cm"))


def conditions(cm: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    return {t: yaml.safe_load(cm[f"trigger.{t}"]) for t in TRIGGERS}


def holds(cond: dict[str, Any], app: dict[str, Any]) -> bool:
    result = evaluate(cond["when"], {"app": app})
    assert isinstance(result, bool)
    return result


@pytest.mark.parametrize("situation", sorted(EXPECTED))
def test_each_trigger_holds_exactly_where_it_should(cm: dict[str, str], situation: str) -> None:
    app = shape(situation)
    validate(app)
    fired = {t for t, conds in conditions(cm).items() if any(holds(c, app) for c in conds)}
    assert fired == EXPECTED[situation]


def test_every_trigger_is_handled_by_the_notifier_and_subscribed(cm: dict[str, str]) -> None:
    from notifier.alerts import RESOLVE_TRIGGERS

    handled = {"on-drift-detected"} | RESOLVE_TRIGGERS | set(NOTICE_TRIGGERS)
    [sub] = yaml.safe_load(cm["subscriptions"])
    assert set(sub["triggers"]) == set(TRIGGERS)
    assert {canonical_trigger(t) for t in TRIGGERS} <= handled
    # issue 32: nothing driftguard ships redefines a name of Argo CD's catalog
    assert all(
        k.split(".", 1)[1].startswith("driftguard-") for k in cm if k.startswith(("trigger.", "template."))
    )
    for trigger, conds in conditions(cm).items():
        for cond in conds:
            assert "oncePer" not in cond  # see the patch's header: once per episode needs the record cleared
            [template] = cond["send"]
            hook = yaml.safe_load(cm[f"template.{template}"])["webhook"]["driftguard"]
            assert hook["method"] == "POST" and hook["path"] == "/v1/notifications"
            for situation in EXPECTED:
                app = shape(situation)
                if situation == "no-status":
                    continue  # Argo CD sends nothing for an app it has not reconciled
                body = json.loads(go_template(hook["body"], app))
                assert validate_body(body) == ("shop", "argocd", canonical_trigger(trigger))
                assert body["trigger"] == trigger


def engine(cond: dict[str, Any], states: list[dict[str, Any]]) -> list[int]:
    """When notifications-engine sends: the record is set when the condition holds and, without
    oncePer, forgotten when it does not (notifications-engine pkg/controller/state.go)."""
    notified: set[str] = set()
    sent = []
    for i, app in enumerate(states):
        try:
            triggered = holds(cond, app)
        except ExprError:
            triggered = False  # Argo CD logs the error and sends nothing
        once = str(evaluate(cond["oncePer"], {"app": app})) if cond.get("oncePer") and triggered else ""
        key = f"{once}:{cond['when']}"
        if triggered and key not in notified:
            notified.add(key)
            sent.append(i)
        elif not triggered and not cond.get("oncePer"):
            notified.discard(key)
    return sent


def _drift(n: int) -> dict[str, Any]:
    app = shape("out-of-sync")
    app["metadata"]["resourceVersion"] = str(100 + n)  # new drift, same OutOfSync episode
    return app


EPISODES: dict[str, tuple[list[Callable[[], dict[str, Any]]], list[int]]] = {
    "driftguard-on-drift-detected": (
        [
            lambda: shape("synced"),
            lambda: _drift(1),
            lambda: _drift(2),
            lambda: shape("sync-running"),
            lambda: shape("synced"),
            lambda: _drift(3),
        ],
        [1, 5],
    ),
    "driftguard-on-drift-resolved": (
        [
            lambda: shape("sync-failed"),
            lambda: shape("reverted-after-failed-sync"),
            lambda: shape("synced"),
            lambda: _drift(1),
            lambda: shape("synced"),
        ],
        [1, 4],
    ),
    "driftguard-on-sync-failed": (
        [
            lambda: shape("sync-running"),
            lambda: shape("sync-failed"),
            lambda: shape("sync-failed"),
            lambda: shape("sync-running"),
            lambda: shape("sync-error"),
        ],
        [1, 4],
    ),
    "driftguard-on-render-refused": (
        [
            lambda: shape("synced"),
            lambda: shape("render-refused"),
            lambda: shape("render-refused"),
            lambda: shape("out-of-sync"),
            lambda: shape("render-refused"),
        ],
        [1, 4],
    ),
    "driftguard-on-prune-pending": (
        [
            lambda: shape("synced"),
            lambda: shape("requires-pruning"),
            lambda: shape("requires-pruning"),
            lambda: shape("synced"),
            lambda: shape("prune-skipped"),
        ],
        [1, 4],
    ),
}


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_each_trigger_fires_once_per_episode_and_again_on_the_next(cm: dict[str, str], trigger: str) -> None:
    states, expected = EPISODES[trigger]
    [cond] = conditions(cm)[trigger]
    assert engine(cond, [copy.deepcopy(s()) for s in states]) == expected


def test_the_interpreter_fails_like_expr_on_nil(cm: dict[str, str]) -> None:
    """The control: an unguarded condition errors on an app without operationState, as in Argo CD."""
    with pytest.raises(ExprError, match="from <nil>"):
        evaluate("app.status.operationState.phase == 'Failed'", {"app": shape("out-of-sync")})
    with pytest.raises(ExprError, match=r"unsupported syntax|unexpected"):
        evaluate("app.status?.sync ?? 1", {"app": shape("synced")})


def test_the_previous_resolved_trigger_missed_a_manual_revert() -> None:
    old = "app.status.operationState != nil and app.status.operationState.phase in ['Succeeded'] and app.status.sync.status == 'Synced'"
    assert evaluate(old, {"app": shape("reverted-after-failed-sync")}) is False

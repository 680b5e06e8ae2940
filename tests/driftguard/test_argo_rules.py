"""Argo CD's comparison rules beyond its test tables: pairing, normalizations, the three-way decision.

Data under tests/data/gitops-engine are Argo's own diff testdata (see SOURCES.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftguard.argocd_cm import rules_from_argocd_cm
from driftguard.drift import ALERTING, IGNORED, PRUNE_CANDIDATE, DriftEngine
from driftguard.errors import InputError
from driftguard.ignore import IgnoreRules
from driftguard.manifests import resource_key
from driftguard.normalize import canonical_duration, canonical_quantity
from driftguard.windows import SyncWindow, can_sync
from tests.helpers import examples

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "gitops-engine"


def load(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads((DATA / name).read_text())
    return obj


def diff_cli(
    tmp_path: Path, desired: dict[str, Any], live: dict[str, Any], *extra: str
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "d.json").write_text(json.dumps(desired))
    (tmp_path / "l.json").write_text(json.dumps(live))
    return subprocess.run(
        [sys.executable, "-m", "driftguard", "diff", "--desired", str(tmp_path / "d.json"), "--live",
         str(tmp_path / "l.json"), "--format", "json", *extra],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("pair", "namespace"), [("elasticsearch", "elasticsearch4"), ("wordpress", "argocd")]
)
def test_git_object_without_namespace_pairs_with_its_live_twin(
    tmp_path: Path, pair: str, namespace: str
) -> None:
    desired, live = load(f"{pair}-config.json"), load(f"{pair}-live.json")
    assert "namespace" not in desired["metadata"]
    for extra in (("--namespace", namespace), ()):  # the destination given, or found as the only twin
        proc = diff_cli(tmp_path, desired, live, *extra)
        out = json.loads(proc.stdout)
        assert out["counts"]["missing"] == 0 and out["counts"]["prune-candidate"] == 0, proc.stdout[:500]
    app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "a"},
           "spec": {"destination": {"namespace": namespace, "server": "https://kubernetes.default.svc"}}}  # fmt: skip
    (tmp_path / "app.json").write_text(json.dumps(app))
    out = json.loads(diff_cli(tmp_path, desired, live, "--app", str(tmp_path / "app.json")).stdout)
    assert out["counts"]["missing"] == 0 and out["counts"]["prune-candidate"] == 0


def test_wrong_destination_namespace_is_missing_and_prune() -> None:
    desired, live = load("elasticsearch-config.json"), load("elasticsearch-live.json")
    drifts = DriftEngine().pairs([desired], [live], default_namespace="other")
    assert sorted(d.status for d in drifts) == ["missing", "prune-candidate"]


def test_cluster_scoped_object_loses_its_git_namespace() -> None:
    desired = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "r", "namespace": "kube-system"}, "rules": []}  # fmt: skip
    live = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}
    drifts = DriftEngine().pairs([desired], [live], default_namespace="apps")
    assert [d.status for d in drifts] == ["synced"]


def test_unsorted_endpoints_with_defaulted_protocol_owned_by_another_manager() -> None:
    desired, live = load("endpoints-config.json"), load("endpoints-live.json")
    drift = DriftEngine().resource(resource_key(live), desired, live)
    assert not [c for c in drift.changes if c.cls in ALERTING], [c.to_json() for c in drift.changes]


def test_remarshal_drops_empty_lists_and_omitempty_zeros_in_git() -> None:
    desired = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "annotations": {}},
               "imagePullSecrets": []}  # fmt: skip
    live = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "x"}}
    assert DriftEngine().resource(resource_key(live), desired, live).status == "synced"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"hostNetwork": False, "containers": [{"name": "c", "image": "i",
                    "volumeMounts": [{"name": "v", "mountPath": "/v", "readOnly": False}]}]}}  # fmt: skip
    live_pod = json.loads(json.dumps(pod))
    del live_pod["spec"]["hostNetwork"]
    del live_pod["spec"]["containers"][0]["volumeMounts"][0]["readOnly"]
    assert DriftEngine().resource(resource_key(pod), pod, live_pod).status == "synced"
    # a pointer field keeps its zero: Git's false against a cluster without it is drift
    sa_off = {**desired, "automountServiceAccountToken": False}
    drift = DriftEngine().resource(resource_key(live), sa_off, live)
    assert [c.change.path for c in drift.alerting] == ["/automountServiceAccountToken"]


def test_live_only_field_counts_only_when_last_applied_had_it() -> None:
    last = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": {"team": "a"}},
        "data": {},
    }
    desired = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    live = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"team": "a", "extra": "b"},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(last)}}}  # fmt: skip
    drift = DriftEngine().resource(resource_key(live), desired, live)
    by_path = {c.change.path: c.cls for c in drift.changes}
    assert by_path["/metadata/labels/team"] == "pending-sync"  # removed from Git: Argo's patch deletes it
    assert by_path["/metadata/labels/extra"] not in ALERTING  # never applied: Argo leaves it, Synced


def test_custom_resource_list_is_replaced_whole() -> None:
    desired = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t"},
        "spec": {"items": [{"a": 1}]},
    }
    live = json.loads(json.dumps(desired))
    live["spec"]["items"][0]["b"] = 2  # JSON merge patch replaces the list: Argo says modified
    drift = DriftEngine().resource(resource_key(live), desired, live)
    assert drift.changes and drift.changes[0].change.path == "/spec/items/0/b"
    live2 = json.loads(json.dumps(desired))
    live2["spec"]["extra"] = 2  # a map field only the cluster has: the merge patch leaves it
    assert DriftEngine().resource(resource_key(live2), desired, live2).status == "synced"


def test_hooks_and_ignore_extraneous_do_not_make_prune_candidates() -> None:
    hook = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "migrate", "namespace": "a", "annotations": {"argocd.argoproj.io/hook": "PreSync"}}}  # fmt: skip
    extraneous = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "gen", "namespace": "a",
                               "annotations": {"argocd.argoproj.io/compare-options": "IgnoreExtraneous"}}}  # fmt: skip
    plain = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old", "namespace": "a"}}
    drifts = {
        d.key.name: d for d in DriftEngine().pairs([hook], [hook, extraneous, plain], default_namespace="a")
    }
    assert drifts["migrate"].changes[0].cls == IGNORED and drifts["gen"].changes[0].cls == IGNORED
    assert drifts["old"].status == PRUNE_CANDIDATE


def test_compare_options_from_argocd_cm() -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "agg"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}  # fmt: skip
    live = {**role, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    last = json.dumps({**role, "rules": [{"apiGroups": [""], "resources": ["svc"], "verbs": ["get"]}]})
    live["metadata"] = {
        "name": "agg",
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last},
    }
    cm = {
        "data": {"resource.compareoptions": "ignoreAggregatedRoles: true\nignoreResourceStatusField: none\n"}
    }
    rules = IgnoreRules(rules_from_argocd_cm(cm))
    assert rules.compare_options.ignore_aggregated_roles and not rules.compare_options.ignores_status(
        "", "Pod"
    )
    assert DriftEngine(rules).resource(resource_key(live), role, live).status == "synced"
    assert rules.matching("", "Pod", "p", "n") == []  # a config rule ignores nothing
    desired = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Running"}}
    live_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Failed"}}
    assert DriftEngine().resource(resource_key(live_pod), desired, live_pod).status == "synced"
    assert DriftEngine(rules).resource(resource_key(live_pod), desired, live_pod).alerting


def test_known_type_fields_and_canonical_values() -> None:
    assert canonical_quantity("2000m") == "2" and canonical_quantity("1.25G") == "1250M"
    assert canonical_quantity("0.2") == "200m" and canonical_quantity("invalid") == "invalid"
    assert canonical_duration("8760h") == "8760h0m0s" and canonical_duration("90s") == "1m30s"
    cm = {"data": {"resource.customizations.knownTypeFields.cert-manager.io_Certificate":
                   "- field: spec.duration\n  type: meta/v1/Duration\n"}}  # fmt: skip
    desired = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "c"},
        "spec": {"duration": "8760h"},
    }
    live = {**desired, "spec": {"duration": "8760h0m0s"}}
    assert DriftEngine().resource(resource_key(live), desired, live).alerting
    assert (
        DriftEngine(IgnoreRules(rules_from_argocd_cm(cm))).resource(resource_key(live), desired, live).status
        == "synced"
    )
    rollout = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": {"name": "r"},
               "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2000m"}},
                        "volumeMounts": [{"name": "v", "mountPath": "/v", "readOnly": False}]}]}}}}  # fmt: skip
    live_r = json.loads(json.dumps(rollout))
    live_r["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    del live_r["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["readOnly"]
    assert DriftEngine().resource(resource_key(live_r), rollout, live_r).status == "synced"  # Argo's built-in


def window(**kw: Any) -> SyncWindow:
    return SyncWindow.from_dict({"kind": "deny", "schedule": "0 12 * * *", "duration": "1h",
                                 "applications": ["*"], **kw}, origin="t")  # fmt: skip


@pytest.mark.parametrize(
    "schedule", ["@daily", "0 10 * * 5-7", "0 10 * * 7", "0 0 * * * *", "* * *", "*/0 * * * *"]
)
def test_schedules_argo_refuses_are_errors(schedule: str) -> None:
    with pytest.raises(InputError):
        window(schedule=schedule)


def test_window_opening_second_manual_and_overrun() -> None:
    w = window()
    assert not w.active(datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC))
    assert w.active(datetime(2026, 12, 1, 12, 0, 1, tzinfo=UTC))
    assert not w.active(datetime(2026, 12, 1, 13, 0, 0, tzinfo=UTC))
    at = datetime(2026, 12, 1, 12, 30, tzinfo=UTC)
    kw: dict[str, Any] = {"app": "a", "namespace": "n", "cluster": "", "now": at}
    assert not can_sync([w], **kw) and not can_sync([w], manual=True, **kw)
    assert can_sync([window(manualSync=True)], manual=True, **kw) and not can_sync(
        [window(manualSync=True)], **kw
    )
    started = datetime(2026, 12, 1, 11, 50, tzinfo=UTC)
    assert can_sync([window(syncOverrun=True)], operation_started=started, **kw)
    assert not can_sync([w], operation_started=started, **kw)


def test_window_matching_and_operator_and_cluster_server() -> None:
    w = SyncWindow.from_dict({"kind": "deny", "schedule": "* * * * *", "duration": "1h", "applications": ["a*"],
                              "clusters": ["https://prod.example.com"], "andOperator": True}, origin="t")  # fmt: skip
    assert w.applies_to("app", "n", "prod", server="https://prod.example.com")
    assert not w.applies_to("app", "n", "prod", server="https://stage.example.com")
    assert not w.applies_to("other", "n", "prod", server="https://prod.example.com")
    either = SyncWindow.from_dict({**{"kind": "deny", "schedule": "* * * * *", "duration": "1h"},
                                   "applications": ["a*"], "clusters": ["x"]}, origin="t")  # fmt: skip
    assert either.applies_to("other", "n", "x") and either.applies_to("app", "n", "y")


def test_builtin_list_merge_strategy_decides_live_only_items() -> None:
    desired = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": ["a"]},
               "spec": {"containers": [{"name": "c", "image": "i", "args": ["x"]}],
                        "tolerations": [{"key": "k", "operator": "Exists"}]}}  # fmt: skip
    live = json.loads(json.dumps(desired))
    live["metadata"]["finalizers"].append("b")  # patchStrategy merge: the patch keeps it
    live["spec"]["containers"].append({"name": "sidecar", "image": "s"})  # merged by name: kept
    assert DriftEngine().resource(resource_key(live), desired, live).status == "synced"
    live["spec"]["tolerations"].append({"key": "extra", "operator": "Exists"})  # atomic: replaced
    live["spec"]["containers"][0]["args"].append("y")  # atomic: replaced
    edit = {"f:metadata": {"f:finalizers": {'v:"b"': {}}},
            "f:spec": {"f:tolerations": {}, "f:containers": {'k:{"name":"c"}': {"f:args": {}}}}}  # fmt: skip
    live["metadata"]["managedFields"] = [
        {"manager": "kubectl-edit", "operation": "Update", "time": "2026-12-01T08:00:00Z", "fieldsV1": edit}
    ]
    drift = DriftEngine().resource(resource_key(live), desired, live)
    by_path = {c.change.path: c.cls for c in drift.changes}
    assert by_path["/spec/tolerations/1/key"] == by_path["/spec/containers/0/args/1"] == "human"
    assert by_path["/metadata/finalizers/1"] == IGNORED  # Argo keeps it: Synced, never an alert
    reordered = json.loads(json.dumps(desired))
    reordered["spec"]["containers"] = [{"name": "z", "image": "z"}, *desired["spec"]["containers"]]
    two = {
        **desired,
        "spec": {
            **desired["spec"],
            "containers": [*desired["spec"]["containers"], {"name": "z", "image": "z"}],
        },
    }
    assert DriftEngine().resource(resource_key(two), two, reordered).status == "synced"  # order alone


def test_gobwas_globs() -> None:
    from driftguard.globs import match

    assert match("{prod,stage}-*", "stage-eu") and not match("{prod,stage}-*", "dev-eu")
    assert match("[!a]pp", "bpp") and not match("[!a]pp", "app") and match("*", "")
    assert not match("a[", "a[")  # gobwas cannot compile it: matches nothing


def test_repeated_git_object_last_one_wins_and_generate_name_is_kept_apart() -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}
    first = {**role, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    last = {**role, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["watch"]}]}
    drifts = DriftEngine().pairs([first, last], [last])
    assert [d.status for d in drifts] == ["synced"]  # state.go NormalizeTargetObjects keeps the last
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "seed-"}}
    keys = [d.key.name for d in DriftEngine().pairs([job, job], [], default_namespace="a")]
    assert keys == ["seed-0", "seed-1"]


def test_unknown_time_zone_is_utc_as_in_argo() -> None:
    w = window(timeZone="Mars/Olympus")
    assert w.tz is None and "read as UTC" in w.describe()
    assert w.active(datetime(2026, 12, 1, 12, 30, tzinfo=UTC))


@pytest.mark.parametrize(
    ("live", "config", "modified"),
    [  # gitops-engine diff_test.go TestStructuredMergeDiff
        ("smd-service-live.yaml", "smd-service-config.yaml", True),
        ("smd-service-live.yaml", "smd-service-config-2-ports.yaml", True),  # removes Argo's own port
        ("smd-service-live-with-type.yaml", "smd-service-config.yaml", True),  # removes Argo's own type
        ("smd-service-live.yaml", "smd-service-config-ports.yaml", True),
        ("smd-deploy-live.yaml", "smd-deploy-config.yaml", False),  # defaults are not changes
    ],
)
def test_server_side_apply_compares_like_structured_merge(live: str, config: str, modified: bool) -> None:
    import yaml

    live_obj = yaml.safe_load((DATA / live).read_text())
    config_obj = yaml.safe_load((DATA / config).read_text())
    drift = DriftEngine().resource(resource_key(live_obj), config_obj, live_obj)
    loud = [c for c in drift.changes if c.cls in {"human", "pending-sync", "missing", "prune-candidate"}]
    assert bool(loud) == modified, [c.to_json() for c in drift.changes]


def test_server_side_apply_removes_only_what_argo_applied() -> None:
    desired = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    live = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "managedFields": [
        {"manager": "argocd-controller", "operation": "Apply", "time": "2026-12-01T08:00:00Z",
         "fieldsV1": {"f:data": {"f:a": {}, "f:gone": {}}}},
        {"manager": "kubectl-edit", "operation": "Update", "time": "2026-12-01T09:00:00Z",
         "fieldsV1": {"f:data": {"f:extra": {}}}}]}, "data": {"a": "1", "gone": "2", "extra": "3"}}  # fmt: skip
    by_path = {
        c.change.path: c.cls
        for c in DriftEngine(server_side_apply=True).resource(resource_key(live), desired, live).changes
    }
    assert by_path["/data/gone"] == "pending-sync"  # Argo applied it, Git dropped it: apply removes it
    assert by_path["/data/extra"] == IGNORED  # another manager's field: apply leaves it, Synced
    plain = {c.change.path: c.cls for c in DriftEngine().resource(resource_key(live), desired, live).changes}
    assert plain["/data/gone"] not in ALERTING  # client-side three-way, no last-applied: kept


def test_tracking_metadata_argo_sets_on_targets_is_not_drift() -> None:
    desired = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    tracking = "shop:/ConfigMap:apps/c"
    live = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "apps", "annotations": {"argocd.argoproj.io/tracking-id": tracking},
                         "labels": {"app.kubernetes.io/instance": "shop"},
                         "managedFields": [{"manager": "argocd-controller", "operation": "Apply", "time": "t",
                                            "fieldsV1": {"f:metadata": {"f:annotations": {"f:argocd.argoproj.io/tracking-id": {}},
                                                                        "f:labels": {"f:app.kubernetes.io/instance": {}}},
                                                         "f:data": {"f:a": {}}}}]},
            "data": {"a": "1"}}  # fmt: skip
    desired["metadata"]["annotations"] = {"argocd.argoproj.io/sync-options": "ServerSideApply=true"}
    live["metadata"]["annotations"]["argocd.argoproj.io/sync-options"] = "ServerSideApply=true"
    assert DriftEngine().resource(resource_key(live), desired, live).status == "synced"
    live["metadata"]["labels"]["app.kubernetes.io/instance"] = "someone-else"  # not Argo's value
    drift = DriftEngine().resource(resource_key(live), desired, live)
    assert [c.change.path for c in drift.changes] == ["/metadata/labels/app.kubernetes.io~1instance"]


def test_builtin_quantities_compare_in_canonical_form() -> None:
    desired = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
               "spec": {"hard": {"requests.cpu": "1000m", "requests.memory": "1024Mi", "pods": 10}}}  # fmt: skip
    live = {**desired, "spec": {"hard": {"requests.cpu": "1", "requests.memory": "1Gi", "pods": "10"}}}
    assert DriftEngine().resource(resource_key(live), desired, live).status == "synced"
    live_more = {**desired, "spec": {"hard": {"requests.cpu": "2", "requests.memory": "1Gi", "pods": "10"}}}
    drift = DriftEngine().resource(resource_key(live_more), desired, live_more)
    assert [c.change.path for c in drift.alerting] == ["/spec/hard/requests.cpu"]


_SPECS = [
    "0 22 * * *",
    "*/15 9-17 * * 1-5",
    "0 0 1 * *",
    "30 2 * 2 *",
    "0 12 13 * 5",
    "5 4 * * sun",
    "0 0 29 2 *",
    "* 10 * * *",
]


@settings(max_examples=examples(150), deadline=None)
@given(
    spec=st.sampled_from(_SPECS),
    minutes=st.integers(min_value=0, max_value=60 * 24 * 800),
    seconds=st.sampled_from([0, 0, 1, 30, 59]),
    span=st.integers(min_value=0, max_value=60 * 24 * 3),
)
def test_window_search_agrees_with_a_minute_by_minute_walk(
    spec: str, minutes: int, seconds: int, span: int
) -> None:
    from datetime import timedelta

    from driftguard.windows import Cron

    cron = Cron(spec)
    now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes, seconds=seconds)
    t = now.replace(second=0) - (timedelta(minutes=1) if seconds == 0 else timedelta(0))
    expected = None
    while t > now - timedelta(minutes=span):
        if cron.matches(t):
            expected = t
            break
        t -= timedelta(minutes=1)
    assert cron.fired_within(now, timedelta(minutes=span)) == expected


def test_a_zero_git_sets_and_the_cluster_changed_counts_only_with_last_applied() -> None:
    desired = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"hostNetwork": False, "containers": [{"name": "c", "image": "i"}]}}  # fmt: skip
    live = json.loads(json.dumps(desired))
    live["spec"]["hostNetwork"] = True
    # two-way (no last-applied): remarshal drops Git's false, the patch never deletes: Synced
    assert not DriftEngine().resource(resource_key(live), desired, live).alerting
    # three-way: last-applied (not re-marshalled) held the false, so the patch deletes the true
    live["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(desired)
    }
    drift = DriftEngine().resource(resource_key(live), desired, live)
    assert [c.change.path for c in drift.changes if c.cls in ("human", "pending-sync")] == [
        "/spec/hostNetwork"
    ]


def test_git_null_deletes_in_a_custom_resource_and_is_unset_in_a_builtin() -> None:
    crd = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t"},
        "spec": {"a": 1, "b": None},
    }
    live = {**crd, "spec": {"a": 1, "b": 2}}
    edit = [
        {"manager": "kubectl-edit", "operation": "Update", "time": "t", "fieldsV1": {"f:spec": {"f:b": {}}}}
    ]
    live["metadata"] = {"name": "t", "managedFields": edit}
    assert [c.cls for c in DriftEngine().resource(resource_key(live), crd, live).changes] == ["human"]
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": None},
        "data": {"a": "1"},
    }
    live_cm = {**cm, "metadata": {"name": "c", "labels": {"x": "y"}, "managedFields": edit}}
    assert not DriftEngine().resource(resource_key(live_cm), cm, live_cm).alerting

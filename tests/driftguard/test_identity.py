"""The join rule (driftguard/identity.py): each clause can make a record match or not, and nothing else does."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from driftguard.identity import (
    IdentityEvent,
    best_match,
    from_admission,
    from_audit,
    guess_resource,
    parse_time,
    who,
)
from standins.apiserver import admission_review, audit_event
from standins.drill import inference_live

T = parse_time("2026-11-29T14:02:07Z")
assert T is not None
OBJ = {
    "group": "apps",
    "kind": "Deployment",
    "namespace": "ai-serving",
    "name": "deepseek-inference",
    "uid": "8a1f0c8e-1111-4d7e-9e55-0a0b0c0d0e0f",
    "resource_version": "918273",
    "manager": "kubectl-patch",
    "time": T,
}


def ev(**kw: object) -> IdentityEvent:
    base = IdentityEvent(
        source="audit",
        event_id="e",
        at=T + 0.4,
        user="alice@example.com",
        verb="patch",
        group="apps",
        resource="deployments",
        namespace="ai-serving",
        name="deepseek-inference",
        field_manager="kubectl-patch",
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_the_drills_audit_event_matches_by_name_manager_and_time() -> None:
    e = from_audit(audit_event(at=T + 0.4))
    assert e is not None and (e.user, e.field_manager, e.resource) == (
        "alice@example.com",
        "kubectl-patch",
        "deployments",
    )
    assert best_match([e], **OBJ) == e  # type: ignore[arg-type]


def test_each_clause_rejects() -> None:
    assert best_match([ev(name="other")], **OBJ) is None  # type: ignore[arg-type]
    assert best_match([ev(resource="statefulsets")], **OBJ) is None  # type: ignore[arg-type]
    assert best_match([ev(group="")], **OBJ) is None  # type: ignore[arg-type]
    assert best_match([ev(field_manager="kubectl-edit")], **OBJ) is None  # type: ignore[arg-type]
    assert best_match([ev(at=T - 6)], **OBJ) is None  # type: ignore[arg-type]
    assert best_match([ev(at=T + 1 + 5.5)], **OBJ) is None  # type: ignore[arg-type]
    assert best_match([ev(verb="delete")], **OBJ) is None  # type: ignore[arg-type]
    assert best_match([ev(subresource="status")], **OBJ) is None  # type: ignore[arg-type]
    assert best_match([ev(user="")], **OBJ) is None  # type: ignore[arg-type]
    # a UID on both sides decides, whatever the name says (a deleted and re-created object)
    assert best_match([ev(uid="another-uid")], **OBJ) is None  # type: ignore[arg-type]
    assert best_match([ev(uid=OBJ["uid"], name="renamed?")], **OBJ) is not None  # type: ignore[arg-type]


def test_exact_resource_version_wins_then_the_closest_then_the_newest() -> None:
    far = ev(event_id="far", at=T + 4, user="bob@example.com")
    near = ev(event_id="near", at=T + 0.5)
    exact = ev(event_id="exact", at=T - 30, resource_version="918273", user="carol@example.com")
    assert best_match([far, near], **OBJ) == near  # type: ignore[arg-type]
    assert best_match([far, near, exact], **OBJ) == exact  # type: ignore[arg-type]
    a, b = (
        ev(event_id="a", at=T + 0.2, user="a@example.com"),
        ev(event_id="b", at=T + 0.7, user="b@example.com"),
    )
    assert best_match([a, b], **OBJ) == b  # both inside the second the API server wrote: the newest


def test_admission_review_matches_by_uid_and_kind() -> None:
    review = admission_review(inference_live())
    e = from_admission(review["request"], now=T + 0.1)
    assert e is not None and e.uid == OBJ["uid"] and e.kind == "Deployment" and e.verb == "update"
    assert best_match([e], **OBJ) == e  # type: ignore[arg-type]
    assert from_admission(admission_review(inference_live(), dry_run=True)["request"]) is None


def test_failed_reads_dry_runs_and_early_stages_are_not_records() -> None:
    assert from_audit(audit_event(at=T, code=422)) is None
    assert from_audit(audit_event(at=T, verb="get")) is None
    assert from_audit(audit_event(at=T, stage="ResponseStarted")) is None
    dry = audit_event(at=T)
    dry["requestURI"] += "&dryRun=All"
    assert from_audit(dry) is None
    no_manager = from_audit(audit_event(at=T, field_manager=None, user_agent="kubectl/v1.31.2 (linux/amd64)"))
    assert no_manager is not None and no_manager.field_manager == "kubectl"  # the API server's default


def test_the_kind_to_resource_guess_is_the_api_servers() -> None:
    assert [guess_resource(k) for k in ("Deployment", "Ingress", "NetworkPolicy", "ConfigMap")] == [
        "deployments",
        "ingresses",
        "networkpolicies",
        "configmaps",
    ]


def test_the_actor_line() -> None:
    assert who(
        manager="kubectl-patch", time="2026-11-29T14:02:07Z", user="alice@example.com", now=T + 180
    ) == ("alice@example.com via kubectl-patch, 14:02:07 (3 min ago)")
    assert who(manager="kubectl-patch", time=T, matched=False, now=T + 5) == (
        "kubectl-patch, 14:02:07 (5 s ago); no identity record matched"
    )
    assert who(manager="kubectl-edit", time=None) == "kubectl-edit"


def test_the_actor_line_in_chinese_and_in_the_configured_zone() -> None:
    from zoneinfo import ZoneInfo

    zh = {"locale": "zh-CN"}
    assert who(manager="kubectl-patch", time=T, user="alice@example.com", now=T + 180, **zh) == (
        "由 alice@example.com 通过 kubectl-patch 修改，14:02:07（3 分钟前）"
    )
    assert who(manager="kubectl-patch", time=T, matched=False, now=T + 5, **zh) == (
        "通过 kubectl-patch 修改，14:02:07（5 秒前）；未匹配到身份记录"
    )
    assert who(manager="kubectl-edit", time=T, now=T + 2 * 86400, **zh) == (
        "通过 kubectl-edit 修改，2026-11-29 14:02:07（2 天前）"
    )
    assert who(manager="", time=None, **zh) == "修改（字段管理器未知）"
    shanghai = ZoneInfo("Asia/Shanghai")
    assert who(manager="kubectl-patch", time=T, now=T + 7200, tz=shanghai, **zh) == (
        "通过 kubectl-patch 修改，22:02:07（2 小时前）"
    )
    assert (
        who(manager="kubectl-patch", time=T, now=T + 60, tz=shanghai) == "kubectl-patch, 22:02:07 (1 min ago)"
    )


events = st.builds(
    ev,
    event_id=st.text(min_size=1, max_size=3),
    at=st.floats(T - 20, T + 20),
    user=st.sampled_from(["", "alice@example.com", "bob@example.com"]),
    name=st.sampled_from(["deepseek-inference", "other"]),
    namespace=st.sampled_from(["ai-serving", "default"]),
    field_manager=st.sampled_from(["kubectl-patch", "kubectl-edit", ""]),
    uid=st.sampled_from(["", OBJ["uid"], "another-uid"]),
    resource_version=st.sampled_from(["", "918273", "1"]),
    verb=st.sampled_from(["patch", "update", "delete"]),
)


@given(st.lists(events, max_size=8))
def test_a_match_is_always_about_this_object_this_manager_and_near_in_time_or_exact(
    evs: list[IdentityEvent],
) -> None:
    m = best_match(evs, **OBJ)  # type: ignore[arg-type]
    if m is None:
        return
    assert m in evs and m.user and m.verb != "delete"
    assert m.field_manager in ("", "kubectl-patch")
    if m.uid:
        assert m.uid == OBJ["uid"]
    else:
        assert (m.namespace, m.name) == ("ai-serving", "deepseek-inference")
    assert m.resource_version == "918273" or T - 5 <= m.at <= T + 6


def test_a_scale_subresource_review_joins_to_the_deployment() -> None:
    """``kubectl scale``: kind autoscaling/v1 Scale, resource apps/v1 deployments, subResource scale."""
    request = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "subResource": "scale",
        "requestKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "requestSubResource": "scale",
        "name": "deepseek-inference",
        "namespace": "ai-serving",
        "operation": "UPDATE",
        "userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"]},
        "object": {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {"name": "deepseek-inference", "namespace": "ai-serving"},
            "spec": {"replicas": 5},
        },
        "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-patch"},
    }
    e = from_admission(request, now=T + 0.3)
    assert e is not None and (e.group, e.resource, e.kind, e.subresource) == (
        "apps",
        "deployments",
        "",
        "scale",
    )
    assert best_match([e], **OBJ) == e  # type: ignore[arg-type]
    # with the parent's UID in the Scale's metadata (what the API server fills in), the UID decides
    request["object"]["metadata"]["uid"] = OBJ["uid"]  # type: ignore[index]
    assert best_match([from_admission(request, now=T + 0.3)], **OBJ) is not None  # type: ignore[arg-type, list-item]
    # a status write is still no spec change of anyone's
    request["subResource"] = "status"
    assert best_match([from_admission(request, now=T + 0.3)], **OBJ) is None  # type: ignore[arg-type, list-item]

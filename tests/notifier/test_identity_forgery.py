"""Forged identity (issue 31): a review cannot replace the real actor, and a flood cannot evict it.

The attack: the shipped admission listener ran with ``DRIFTGUARD_NOTIFIER_ADMISSION_AUTH=none`` and
no NetworkPolicy; a review posted without credentials, claiming ``alice@example.com`` for the
object's UID and resourceVersion, replaced the real actor of a drift (the newest exact match
won), and a flood evicted real records (100,000 rows for all sources, oldest first).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from flask import Flask
from hypothesis import given, settings
from hypothesis import strategies as st

from driftguard.identity import IdentityEvent, best_match
from notifier.app import create_app
from notifier.identity import OutboxIdentityStore
from notifier.outbox import SqliteOutbox
from standins import argo_api, receivers
from standins.apiserver import admission_review, audit_event, event_list
from standins.drill import inference_live
from tests.helpers import examples

from .conftest import AUDIT_TOKEN, make_config, make_settings

T = 1_800_000_000.0
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


def record(source: str, user: str, **kw: object) -> IdentityEvent:
    base = IdentityEvent(
        source=source,
        event_id=f"{source}-{user}-{kw.get('at', T)}",
        at=T + 0.4,
        user=user,
        verb="patch",
        group="apps",
        resource="deployments",
        kind="Deployment" if source == "admission" else "",
        namespace="ai-serving",
        name="deepseek-inference",
        uid=OBJ["uid"],  # type: ignore[arg-type]
        resource_version="",
        field_manager="kubectl-patch",
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_a_forged_exact_review_does_not_outrank_the_audit_record() -> None:
    real = record("audit", "bob@example.com")  # the API server's own Event, matched by time
    forged = record("admission", "alice@example.com", resource_version=OBJ["resource_version"], at=T + 30)
    assert best_match([forged, real], **OBJ) == real  # type: ignore[arg-type]
    assert best_match([real, forged], **OBJ) == real  # type: ignore[arg-type]
    # without an audit record the review still names the person (managed clusters)
    assert best_match([forged], **OBJ) == forged  # type: ignore[arg-type]


EVENTS = st.lists(
    st.builds(
        lambda source, user, dt, exact, manager: record(
            source,
            user,
            at=T + dt,
            resource_version=OBJ["resource_version"] if exact else "1",
            field_manager=manager,
        ),
        st.sampled_from(["audit", "admission"]),
        st.sampled_from(["alice@example.com", "bob@example.com", "mallory@example.com"]),
        st.floats(min_value=-9, max_value=9, allow_nan=False),
        st.booleans(),
        st.sampled_from(["kubectl-patch", "", "helm"]),
    ),
    max_size=8,
)


def _reference(events: list[IdentityEvent]) -> IdentityEvent | None:
    """docs/identity.md's rule written out: audit first; exact resourceVersion; closest in time; newest."""

    def matches(e: IdentityEvent) -> bool:
        if e.field_manager not in ("", "kubectl-patch"):
            return False
        if e.resource_version == OBJ["resource_version"]:
            return True
        return max(0.0, T - e.at, e.at - (T + 1.0)) <= 5.0

    def key(e: IdentityEvent) -> tuple[int, int, float, float]:
        exact = e.resource_version == OBJ["resource_version"]
        gap = 0.0 if exact else max(0.0, T - e.at, e.at - (T + 1.0))
        return (e.source != "audit", not exact, gap, -e.at)

    found = sorted((e for e in events if matches(e)), key=key)
    return found[0] if found else None


@settings(max_examples=examples(300), deadline=None)
@given(events=EVENTS)
def test_an_admission_record_never_outranks_an_audit_record(events: list[IdentityEvent]) -> None:
    got = best_match(events, **OBJ)  # type: ignore[arg-type]
    want = _reference(events)
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        assert (got.source, got.user, got.at, got.resource_version) == (
            want.source,
            want.user,
            want.at,
            want.resource_version,
        )
    if any(e.source == "audit" for e in events if _reference([e]) is not None):
        assert got is not None and got.source == "audit"


def test_a_flood_of_one_source_never_evicts_the_other(tmp_path: Path) -> None:
    outbox = SqliteOutbox(tmp_path / "outbox.sqlite3")
    store = OutboxIdentityStore(outbox, retention=3600, max_rows=20)
    now = time.time()
    real = [record("audit", f"user-{i}@example.com", event_id=f"a{i}", at=now - 60 + i) for i in range(20)]
    store.add(real)
    flood = [
        record("admission", "mallory@example.com", event_id=f"f{i}", at=now - 30 + i / 1000)
        for i in range(500)
    ]
    store.add(flood)
    store.prune(now)
    kept = store.candidates(namespace="ai-serving", name="deepseek-inference", uid="")
    assert {e.event_id for e in kept if e.source == "audit"} == {f"a{i}" for i in range(20)}
    assert sum(e.source == "admission" for e in kept) <= 20
    assert store.count() == 40
    outbox.close()


def test_an_unauthenticated_review_records_nothing(
    tmp_path: Path, argo: argo_api.FakeArgo, rx: receivers.Receivers
) -> None:
    """The admission listener authenticates by default: the forged post of the issue is a 401."""
    application: Flask = create_app(
        make_settings(tmp_path, argo.url, audit_token=AUDIT_TOKEN), config=make_config(rx)
    )
    try:
        client = application.test_client()
        forged = admission_review(inference_live(), user="alice@example.com")
        assert client.post("/v1/admission", json=forged).status_code == 401
        ok = client.post("/v1/admission", json=forged, headers={"Authorization": f"Bearer {AUDIT_TOKEN}"})
        assert ok.status_code == 200 and ok.get_json()["response"]["allowed"] is True
        state = application.extensions["driftguard"]
        state.recorder.flush()
        audit = event_list(audit_event(at=time.time(), name="deepseek-inference"))
        assert client.post("/v1/audit", json=audit).status_code == 401
        assert state.identities.count() == 1
    finally:
        state = application.extensions["driftguard"]
        state.worker.expander.close()
        state.outbox.close()

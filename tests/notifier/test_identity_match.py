"""``POST /v1/identities/match``: the drift gate's question "who made these writes", behind the read token."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from flask import Flask

from standins import argo_api
from standins.apiserver import audit_event, event_list
from standins.drill import serve_drill

from .conftest import AUDIT_TOKEN, READ_TOKEN, TOKEN
from .test_identity import audit_post, retime_patch

PATH = "/v1/identities/match"


def ask(app: Flask, body: Any, *, token: str = READ_TOKEN, raw: bytes | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return app.test_client().post(PATH, data=raw if raw is not None else json.dumps(body), headers=headers)


def write(stamp: str | None, **extra: str) -> dict[str, Any]:
    return {
        "group": "apps",
        "kind": "Deployment",
        "namespace": "ai-serving",
        "name": "deepseek-inference",
        "manager": "kubectl-patch",
        "time": stamp,
        **extra,
    }


def test_it_names_the_person_by_the_join_rule_in_order_and_null_where_none_matched(
    idapp: Flask, argo: argo_api.FakeArgo
) -> None:
    serve_drill(argo)
    at = int(time.time()) - 2
    stamp = retime_patch(argo, at)
    mine = audit_event(at=at + 0.3)
    other = audit_event(at=at + 0.1, user="mallory@example.com", name="another-deployment")
    assert audit_post(idapp.test_client(), event_list(mine, other)).status_code == 200
    resp = ask(
        idapp,
        {
            "writes": [
                write(stamp),
                write(stamp, manager="kubectl-edit"),  # another tool: not alice's patch
                write("2026-01-01T00:00:00Z"),  # long before any record
                write(stamp, name="another-deployment"),
            ]
        },
    )
    assert resp.status_code == 200, resp.get_json()
    first, edit, old, mallory = resp.get_json()["matches"]
    assert (first["user"], first["source"]) == ("alice@example.com", "audit")
    assert abs(first["at"] - (at + 0.3)) < 0.01
    assert edit is None and old is None
    assert mallory["user"] == "mallory@example.com"
    # nothing else of the record leaves: no groups, source IPs or user agent
    assert set(first) == {"user", "source", "at"}
    assert "203.0.113.7" not in resp.get_data(as_text=True)


@pytest.mark.parametrize("token", ["", TOKEN, AUDIT_TOKEN, "wrong-token-0123456789abc"])
def test_only_the_read_token_may_ask(idapp: Flask, token: str) -> None:
    resp = ask(idapp, {"writes": []}, token=token)
    assert resp.status_code == 401 and "read token" in resp.get_json()["error"]


def test_without_a_read_token_configured_asking_is_off(app: Flask) -> None:
    resp = ask(app, {"writes": []}, token=READ_TOKEN)
    assert resp.status_code == 403 and "READ_TOKEN" in resp.get_json()["error"]


@pytest.mark.parametrize(
    ("raw", "status", "says"),
    [
        (b"not json", 400, "not JSON"),
        (b"[" * 5000 + b"]" * 5000, 400, "not JSON"),
        (b"[]", 400, "`writes`"),
        (json.dumps({"writes": {}}).encode(), 400, "`writes`"),
        (json.dumps({"writes": [1]}).encode(), 400, "writes[0] must be an object"),
        (json.dumps({"writes": [write(None, kind="")]}).encode(), 400, "writes[0].kind is required"),
        (json.dumps({"writes": [write(None, name="x" * 254)]}).encode(), 400, "writes[0].name"),
        (json.dumps({"writes": [write("yesterday")]}).encode(), 400, "writes[0].time"),
        (json.dumps({"writes": [{**write(None), "extra": 1}]}).encode(), 400, "unknown field"),
        (json.dumps({"writes": [write(None)] * 101}).encode(), 413, "at most 100"),
        (b"x" * (9 * 1024 * 1024), 413, "larger"),
    ],
)
def test_a_bad_question_gets_a_clear_4xx(idapp: Flask, raw: bytes, status: int, says: str) -> None:
    resp = ask(idapp, None, raw=raw)
    assert resp.status_code == status and says in resp.get_json()["error"], resp.get_json()


def test_it_is_in_the_openapi_contract_behind_the_read_token(idapp: Flask) -> None:
    spec = (
        idapp.test_client().get("/openapi.json", headers={"Authorization": f"Bearer {READ_TOKEN}"}).get_json()
    )
    op = spec["paths"][PATH]["post"]
    assert op["security"] == [{"read": []}]
    assert {"200", "400", "401", "403", "413", "503"} <= set(op["responses"])
    assert "501" not in op["responses"]  # the identity store is in either outbox

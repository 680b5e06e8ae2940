"""The drift gate names the person, asked of the notifier's identity store; no notifier fault changes a verdict.

Both services run as real gunicorn processes over the Argo CD stand-in; between them, a proxy
(standins/proxy.py) answers with every fault a network or an ingress can produce. The gate's
answer with a failing lookup must be its answer without the lookup, the actor line saying that no
identity was available.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis_provider.gates.drift import NO_IDENTITY
from analysis_provider.settings import AnalysisSettings
from driftguard.argocd import ArgoCDSettings
from driftguard.errors import ConfigError
from driftguard.identity import who
from standins import argo_api, proxy, receivers
from standins.apiserver import audit_event, event_list
from standins.drill import serve_drill
from standins.faults import Fault, refused_url
from standins.processes import free_port, start_cli, stop
from standins.receivers import Receivers
from tests.notifier.conftest import AUDIT_TOKEN, PD_KEY, READ_TOKEN, service_env
from tests.notifier.test_identity import retime_patch

from .conftest import TOKEN, get, make_app

GPU = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"
DRIFT = "/v1/gates/drift?app=deepseek-inference"


@dataclass
class Notifier:
    url: str
    proc: Any
    log: Path


def start_notifier(tmp_path: Path, argo: argo_api.FakeArgo, rx: Receivers) -> Notifier:
    env = service_env(
        tmp_path,
        argo,
        rx.channels(feishu_secret="feishu-secret", routing_key=PD_KEY),
        DRIFTGUARD_NOTIFIER_AUDIT_TOKEN=AUDIT_TOKEN,
        DRIFTGUARD_NOTIFIER_READ_TOKEN=READ_TOKEN,
        DRIFTGUARD_NOTIFIER_WORKER="false",
    )
    port = free_port()
    log = tmp_path / "notifier.log"
    proc = start_cli("driftguard-notifier", port, env, log, workers=1, threads=4)
    return Notifier(f"http://127.0.0.1:{port}", proc, log)


def post_audit(notifier: Notifier, *events: dict[str, Any]) -> None:
    resp = requests.post(
        f"{notifier.url}/v1/audit",
        data=json.dumps(event_list(*events)),
        headers={"Authorization": f"Bearer {AUDIT_TOKEN}"},
        timeout=10,
    )
    assert resp.status_code == 200 and resp.json()["stored"] == len(events), resp.text


@pytest.fixture
def drill(tmp_path: Path, argo: argo_api.FakeArgo) -> Iterator[tuple[Notifier, str]]:
    """The drill's patch made two seconds ago, its audit Event in a real notifier; the managedFields time."""
    serve_drill(argo)
    at = int(time.time()) - 2
    stamp = retime_patch(argo, at)
    with receivers.serve() as rx:
        notifier = start_notifier(tmp_path, argo, rx)
        try:
            post_audit(notifier, audit_event(at=at + 0.3))
            yield notifier, stamp
        finally:
            stop(notifier.proc)


PATIENT = {"timeout": 9.0, "notifier_timeout": 8.0}
"""Deadlines for a gate whose lookup must get the notifier's answer: generous, never a condition
of the test (a short lookup deadline is for the fault space, where a timeout is one outcome)."""


def gate_env(argo: argo_api.FakeArgo, tmp_path: Path, notifier_url: str, **extra: str) -> dict[str, str]:
    token_file = tmp_path / "read-token"
    token_file.write_text(READ_TOKEN + "\n")  # as a mounted Secret key often ends
    return {
        "PATH": os.environ["PATH"],
        "TMPDIR": str(tmp_path),
        "DRIFTGUARD_ANALYSIS_TOKEN": TOKEN,
        "DRIFTGUARD_REDACT_KEY": "redact-key-for-tests-0123456789abcdef",
        "DRIFTGUARD_ARGOCD_URL": argo.url,
        "DRIFTGUARD_ARGOCD_TOKEN": argo.token,
        # the lookup must succeed here: a gunicorn asking another on a loaded machine (a worker's
        # first lookup imports what it needs) gets the most the settings allow (under 10 s)
        "DRIFTGUARD_ANALYSIS_TIMEOUT": str(PATIENT["timeout"]),
        "DRIFTGUARD_ANALYSIS_CACHE_TTL": "0",
        "DRIFTGUARD_ANALYSIS_NOTIFIER_URL": notifier_url,
        "DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN_FILE": str(token_file),
        "DRIFTGUARD_ANALYSIS_NOTIFIER_TIMEOUT": str(PATIENT["notifier_timeout"]),
        **extra,
    }


def gate(url: str) -> dict[str, Any]:
    resp = requests.get(f"{url}{DRIFT}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def reason_for(answer: dict[str, Any], path: str) -> str:
    return next(r for r in answer["reasons"] if f": {path} " in r)


@pytest.mark.slow  # a notifier under gunicorn per case
def test_the_gate_names_the_person_and_fails_the_same_when_the_notifier_is_gone(
    tmp_path: Path, argo: argo_api.FakeArgo, drill: tuple[Notifier, str]
) -> None:
    notifier, stamp = drill
    port = free_port()
    log = tmp_path / "gate.log"
    proc = start_cli("driftguard-analysis", port, gate_env(argo, tmp_path, notifier.url), log)
    url = f"http://127.0.0.1:{port}"
    try:
        named = gate(url)
        assert named["ok"] is False and named["verdict"] == "fail"
        gpu = reason_for(named, GPU)
        expected = who(manager="kubectl-patch", time=stamp, user="alice@example.com").split(" (")[0]
        assert f"by {expected} (" in gpu, gpu
        # the Secret's kubectl edit has no audit record: the field manager, and that nothing matched
        edit = next(r for r in named["reasons"] if "kubectl-edit" in r)
        assert edit.endswith("; no identity record matched") and "alice" not in edit, edit
        assert named["observed"]["identity"] == {"lookup": "ok", "matched": 1}

        stop(notifier.proc)  # the notifier is gone: the verdict is not
        alone = gate(url)
        assert (alone["ok"], alone["verdict"]) == (False, "fail")
        assert {k: v for k, v in alone["observed"].items() if k != "identity"} == {
            k: v for k, v in named["observed"].items() if k != "identity"
        }
        gpu = reason_for(alone, GPU)
        bare = who(manager="kubectl-patch", time=stamp).split(" (")[0]
        assert f"by {bare} (" in gpu and gpu.endswith(f"; {NO_IDENTITY}") and "alice" not in gpu, gpu
        assert alone["observed"]["identity"]["lookup"] == "failed"
        assert "unreachable" in alone["observed"]["identity"]["error"]
    finally:
        stop(proc)
    assert READ_TOKEN not in log.read_text() and READ_TOKEN not in notifier.log.read_text()


# --- every notifier-side fault: the verdict as without the lookup ---------------------------------

AGO = re.compile(r"\(\d+ (s|min|h|d) ago\)")


def _stable(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer without its clock: ``checkedAt`` and "(N s ago)" move between two calls."""
    out = {k: v for k, v in answer.items() if k != "checkedAt"}
    out["reasons"] = [AGO.sub("(ago)", r) for r in answer["reasons"]]
    out["observed"] = {k: v for k, v in answer["observed"].items() if k != "identity"}
    return out


def same_verdict(base: dict[str, Any], got: dict[str, Any], *, must_fail_lookup: bool) -> None:
    """``got`` is ``base``: same verdict, observations and reasons, but for what the actor line says of identity."""
    b, g = _stable(base), _stable(got)
    assert {k: v for k, v in g.items() if k != "reasons"} == {k: v for k, v in b.items() if k != "reasons"}
    assert len(g["reasons"]) == len(b["reasons"])
    for mine, theirs in zip(g["reasons"], b["reasons"], strict=True):
        if " by " not in theirs:
            assert mine == theirs  # missing, prune-candidate: no actor
            continue
        head, _, actor = theirs.rpartition(" by ")
        unavailable = f"{theirs}; {NO_IDENTITY}"
        if must_fail_lookup:
            assert mine == unavailable, (mine, theirs)
        else:  # a well-formed answer through the fault: a person, or "no record matched"
            assert (
                mine in (unavailable, f"{theirs}; no identity record matched")
                or re.fullmatch(re.escape(head + " by ") + ".+ via " + re.escape(actor), mine) is not None
            ), (mine, theirs)
    if must_fail_lookup:
        assert got["observed"]["identity"]["lookup"] == "failed"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
match_like = st.fixed_dictionaries(
    {"matches": st.lists(st.none() | st.dictionaries(st.sampled_from(["user", "source", "at"]), json_values))}
)
FAILING = st.one_of(
    st.builds(Fault, st.just("reset")),
    st.builds(Fault, st.just("trickle"), delay=st.floats(0.02, 0.2)),
    st.builds(
        Fault,
        st.just("status"),
        status=st.sampled_from([301, 302, 307, 400, 401, 403, 404, 413, 429, 500, 501, 502, 503, 504]),
        body=st.none() | json_values,
    ),
    st.builds(Fault, st.just("html"), status=st.sampled_from([200, 502, 503])),
    st.builds(Fault, st.just("truncated")),
    st.builds(Fault, st.just("cut")),
    st.builds(Fault, st.just("slow"), delay=st.floats(0.6, 1.2)),
    st.just(Fault("body", body={"matches": [{"user": "x" * 100_000, "source": "audit", "at": 1.0}]})),
)
ANY_ANSWER = st.one_of(
    st.builds(Fault, st.just("body"), body=json_values | match_like),
    st.builds(Fault, st.just("slow"), delay=st.floats(0.0, 1.2)),
)
LOOKUP_TIMEOUT = 0.4


@pytest.fixture
def through_proxy(
    tmp_path: Path, argo: argo_api.FakeArgo, drill: tuple[Notifier, str]
) -> Iterator[tuple[proxy.FaultyProxy, dict[str, Flask]]]:
    notifier, _ = drill
    with proxy.serve(notifier.url) as px:
        # every gate gets the whole deadline the settings allow (the verdict must come, however
        # loaded the machine); the lookup's own is short for the fault space ("proxy": a slow
        # answer past it is a certain failure) and generous where the answer must arrive
        whole: dict[str, Any] = {"timeout": PATIENT["timeout"]}
        lookup: dict[str, Any] = {
            **whole,
            "notifier_read_token": READ_TOKEN,
            "notifier_timeout": LOOKUP_TIMEOUT,
        }
        patient: dict[str, Any] = {**lookup, "notifier_timeout": PATIENT["notifier_timeout"]}
        apps = {
            "without": make_app(argo, **whole),
            "proxy": make_app(argo, notifier_url=px.url, **lookup),
            "healthy": make_app(argo, notifier_url=px.url, **patient),
            "down": make_app(argo, notifier_url=refused_url(), **lookup),
            "wrong-token": make_app(
                argo,
                notifier_url=notifier.url,
                **{**patient, "notifier_read_token": "wrong-read-token-0123456"},
            ),
        }
        yield px, apps


def test_the_lookup_through_a_healthy_proxy_names_alice_and_sends_the_token_only_as_a_header(
    through_proxy: tuple[proxy.FaultyProxy, dict[str, Flask]],
) -> None:
    px, apps = through_proxy
    answer = get(apps["healthy"], DRIFT).get_json()
    assert "by alice@example.com via kubectl-patch" in reason_for(answer, GPU)
    asked = px.seen[-1]
    assert asked["method"] == "POST" and asked["path"] == "/v1/identities/match"
    assert asked["headers"]["Authorization"] == f"Bearer {READ_TOKEN}"
    writes = proxy.as_json(px)["writes"]
    # one question per write, not per field: the Deployment's patch and the Secret's edit
    assert sorted(w["manager"] for w in writes) == ["kubectl-edit", "kubectl-patch"]
    deployment = next(w for w in writes if w["kind"] == "Deployment")
    assert deployment["uid"] and deployment["resourceVersion"] == "918273"


@pytest.mark.slow  # a notifier under gunicorn per case
@pytest.mark.parametrize("target", ["down", "wrong-token"])
def test_a_notifier_that_is_down_or_refuses_the_token_leaves_the_verdict(
    through_proxy: tuple[proxy.FaultyProxy, dict[str, Flask]], target: str
) -> None:
    _, apps = through_proxy
    base = get(apps["without"], DRIFT).get_json()
    got = get(apps[target], DRIFT)
    assert got.status_code == 200
    same_verdict(base, got.get_json(), must_fail_lookup=True)
    error = got.get_json()["observed"]["identity"]["error"]
    assert ("HTTP 401" if target == "wrong-token" else "unreachable") in error


SETTINGS = settings(
    max_examples=int(os.environ.get("DRIFTGUARD_FAULT_EXAMPLES", "30")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.slow  # a fault space
@SETTINGS
@given(fault=FAILING | ANY_ANSWER)
def test_no_notifier_fault_changes_the_verdict(
    through_proxy: tuple[proxy.FaultyProxy, dict[str, Flask]],
    caplog: pytest.LogCaptureFixture,
    fault: Fault,
) -> None:
    px, apps = through_proxy
    base = get(apps["without"], DRIFT).get_json()
    px.fault = fault
    try:
        with caplog.at_level(logging.WARNING):
            got = get(apps["proxy"], DRIFT)
    finally:
        px.fault = None
    assert got.status_code == 200, got.get_json()
    certain = fault.kind not in ("body", "slow") or (
        fault.kind == "slow" and fault.delay > LOOKUP_TIMEOUT + 0.1
    )
    if fault.kind == "body" and isinstance(fault.body, dict) and len(json.dumps(fault.body)) > 65536:
        certain = True  # over the answer cap
    same_verdict(base, got.get_json(), must_fail_lookup=certain)
    assert READ_TOKEN not in got.get_data(as_text=True) and READ_TOKEN not in caplog.text


# --- settings: validated at construction ---------------------------------------------------------


def _settings(**kw: Any) -> AnalysisSettings:
    return AnalysisSettings(
        token=TOKEN,
        redact_key=b"redact-key-for-tests-0123456789abcdef",
        argocd=ArgoCDSettings(url="http://argocd.example.com"),
        **kw,
    )


@pytest.mark.parametrize(
    ("kw", "names"),
    [
        ({"notifier_read_token": READ_TOKEN}, "DRIFTGUARD_ANALYSIS_NOTIFIER_URL"),
        ({"notifier_url": "ftp://notifier.example.com", "notifier_read_token": READ_TOKEN}, "_NOTIFIER_URL"),
        ({"notifier_url": "http://", "notifier_read_token": READ_TOKEN}, "_NOTIFIER_URL"),
        (
            {
                "notifier_url": f"http://reader:{READ_TOKEN}@notifier.example.com",
                "notifier_read_token": READ_TOKEN,
            },
            "_NOTIFIER_URL",
        ),
        (
            {"notifier_url": "http://notifier.example.com?token=x", "notifier_read_token": READ_TOKEN},
            "_NOTIFIER_URL",
        ),
        ({"notifier_url": "http://notifier.example.com"}, "_NOTIFIER_READ_TOKEN"),
        (
            {"notifier_url": "http://notifier.example.com", "notifier_read_token": "short"},
            "_NOTIFIER_READ_TOKEN",
        ),
        (
            {
                "notifier_url": "http://notifier.example.com",
                "notifier_read_token_file": "/nonexistent/read-token",
            },
            "_NOTIFIER_READ_TOKEN_FILE",
        ),
        (
            {
                "notifier_url": "http://notifier.example.com",
                "notifier_read_token": READ_TOKEN,
                "notifier_timeout": 4.0,
            },
            "_NOTIFIER_TIMEOUT",
        ),
        (
            {
                "notifier_url": "http://notifier.example.com",
                "notifier_read_token": READ_TOKEN,
                "notifier_timeout": 0,
            },
            "_NOTIFIER_TIMEOUT",
        ),
        (
            {
                "notifier_url": "https://notifier.example.com",
                "notifier_read_token": READ_TOKEN,
                "notifier_ca_file": "/nonexistent/ca.pem",
            },
            "_NOTIFIER_CA_FILE",
        ),
    ],
)
def test_a_bad_lookup_setting_stops_start_up_naming_it_and_never_the_token(
    kw: dict[str, Any], names: str
) -> None:
    with pytest.raises(ConfigError) as err:
        _settings(**kw)
    assert names in str(err.value) and READ_TOKEN not in str(err.value)


def test_the_token_file_is_read_once_at_construction_and_never_shown(tmp_path: Path) -> None:
    both = tmp_path / "token"
    both.write_text(f"  {READ_TOKEN}\n")
    s = _settings(notifier_url="http://notifier.example.com:8080/", notifier_read_token_file=str(both))
    assert s.notifier_read_token == READ_TOKEN and READ_TOKEN not in repr(s)
    with pytest.raises(ConfigError, match="not both"):
        _settings(
            notifier_url="http://notifier.example.com",
            notifier_read_token=READ_TOKEN,
            notifier_read_token_file=str(both),
        )
    env = AnalysisSettings.from_env(
        {
            "DRIFTGUARD_ANALYSIS_TOKEN": TOKEN,
            "DRIFTGUARD_REDACT_KEY": "redact-key-for-tests-0123456789abcdef",
            "DRIFTGUARD_ARGOCD_URL": "http://argocd.example.com",
            "DRIFTGUARD_ARGOCD_TOKEN": "argocd-token",
            "DRIFTGUARD_ANALYSIS_NOTIFIER_URL": "http://notifier.example.com",
            "DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN_FILE": str(both),
            "DRIFTGUARD_ANALYSIS_NOTIFIER_TIMEOUT": "0.5",
        }
    )
    assert (env.notifier_url, env.notifier_read_token, env.notifier_timeout) == (
        "http://notifier.example.com",
        READ_TOKEN,
        0.5,
    )

"""Per-caller authorisation (issue 31): each team's gate token reads only its own Applications.

The attacks: with the one analysis token every Rollout namespace held, tenant B read tenant A's
drift (paths, values, actors), and sent ``query=count(kube_secret_info{namespace="payments"})``
to Prometheus unchanged; the value came back in the 502 text. Now ``DRIFTGUARD_ANALYSIS_CALLERS``
names each caller's token, projects and apps (Argo CD globs); a free query is refused, and no
answer carries what Prometheus said beyond the verdict's own value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis_provider.app import create_app
from analysis_provider.callers import Caller, load_callers, parse_callers
from analysis_provider.settings import AnalysisSettings
from driftguard.argocd import ArgoCDSettings
from driftguard.errors import ConfigError
from standins import argo_api, prometheus
from standins.argo_api import application
from tests.helpers import examples

KEY = b"redact-key-for-tests-0123456789abcdef"
TEAM_A = "team-a-gate-token-0123456789abcdef"
TEAM_B = "team-b-gate-token-0123456789abcdef"
SINGLE = "single-team-token-0123456789abcdef"


def _app(name: str, project: str) -> dict[str, Any]:
    app = application(name, resources=[])
    app["spec"]["project"] = project
    return app


def provider(
    tmp_path: Path, argo: argo_api.FakeArgo, prom: prometheus.FakePrometheus, *, token: str = ""
) -> Flask:
    (tmp_path / "team-b").write_text(TEAM_B + "\n")  # a mounted Secret key, as the manifests mount it
    callers = tmp_path / "callers.yaml"
    callers.write_text(
        f"""
callers:
  - name: team-a
    token: {TEAM_A}
    projects: ["payments", "payments-*"]
    apps: ["*"]
  - name: team-b
    tokenFile: team-b
    projects: ["search"]
    apps: ["search-*"]
"""
    )
    return create_app(
        AnalysisSettings(
            token=token,
            callers_file=str(callers),
            redact_key=KEY,
            prometheus_url=prom.url,
            timeout=2.0,
            cache_ttl=0,
            argocd=ArgoCDSettings(url=argo.url, token=argo.token),
        )
    )


@pytest.fixture
def world(tmp_path: Path):  # type: ignore[no-untyped-def]
    with argo_api.serve() as argo, prometheus.serve() as prom:
        argo.put(_app("payments-api", "payments"))
        argo.put(_app("search-web", "search"))
        argo.put(_app("search-admin", "payments-internal"))  # a search-* name in another project
        yield argo, prom


def ask(app: Flask, path: str, token: str) -> tuple[int, dict[str, Any]]:
    resp = app.test_client().get(path, headers={"Authorization": f"Bearer {token}"})
    return resp.status_code, resp.get_json()


def test_tenant_b_cannot_read_tenant_a_drift(tmp_path: Path, world: Any) -> None:
    argo, prom = world
    app = provider(tmp_path, argo, prom)
    for gate in ("drift", "sync", "freeze", "all"):
        status, body = ask(app, f"/v1/gates/{gate}?app=payments-api", TEAM_B)
        assert status == 403, (gate, body)
        assert "team-b" in body["error"] and "reasons" not in body and "observed" not in body
        assert ask(app, f"/v1/gates/{gate}?app=payments-api", TEAM_A)[0] == 200
    assert ask(app, "/v1/gates/drift?app=search-web", TEAM_B)[0] == 200
    # the app glob matches, the project does not: both must match
    assert ask(app, "/v1/gates/drift?app=search-admin", TEAM_B)[0] == 403
    assert ask(app, "/v1/gates/drift?app=search-admin", TEAM_A)[0] == 200


def test_a_missing_app_looks_like_a_foreign_one_to_a_scoped_caller(tmp_path: Path, world: Any) -> None:
    argo, prom = world
    app = provider(tmp_path, argo, prom, token=SINGLE)
    assert ask(app, "/v1/gates/drift?app=search-nothing", TEAM_B)[0] == 403
    # the single-team token is a caller of every project: it learns that the app does not exist
    status, body = ask(app, "/v1/gates/drift?app=search-nothing", SINGLE)
    assert status == 200 and body["verdict"] == "fail" and "not found" in body["reasons"][0]
    assert ask(app, "/v1/gates/drift?app=payments-api", SINGLE)[0] == 200


def test_an_unknown_token_is_401(tmp_path: Path, world: Any) -> None:
    argo, prom = world
    app = provider(tmp_path, argo, prom)
    assert ask(app, "/v1/gates/drift?app=payments-api", "not-a-caller-0123456789abcdef")[0] == 401
    assert ask(app, "/metrics", "not-a-caller-0123456789abcdef")[0] == 401
    assert app.test_client().get("/v1/gates/drift?app=payments-api").status_code == 401


def test_a_free_query_never_reaches_prometheus(tmp_path: Path, world: Any) -> None:
    argo, prom = world
    app = provider(tmp_path, argo, prom)
    attack = 'count(kube_secret_info{namespace="payments"})'
    status, body = ask(app, f"/v1/gates/success-rate?query={attack}", TEAM_B)
    assert status == 400 and "query" in body["error"]
    # nor through the template's arguments: a service cannot close the label's quotes
    status, body = ask(app, '/v1/gates/success-rate?service=a"}) or count(kube_secret_info', TEAM_B)
    assert status == 400
    assert prom.queries == []
    assert ask(app, "/v1/gates/success-rate?service=payment", TEAM_B)[0] == 200
    assert prom.queries[-1].startswith('sum(rate(http_requests_total{service="payment"')


def test_prometheus_errors_and_values_are_not_echoed(tmp_path: Path, world: Any) -> None:
    argo, prom = world
    app = provider(tmp_path, argo, prom)
    prom.status = 400  # the stand-in answers {"errorType": "bad_data", "error": "parse error at char 5"}
    status, body = ask(app, "/v1/gates/success-rate?service=payment", TEAM_A)
    assert status == 502 and "parse error" not in body["error"] and "bad_data" in body["error"]
    prom.status, prom.value = 200, "4217"  # a count, not a rate: refused without saying how many
    status, body = ask(app, "/v1/gates/success-rate?service=payment", TEAM_A)
    assert status == 502 and "4217" not in body["error"]


def test_query_templates_from_the_platform(tmp_path: Path, world: Any) -> None:
    argo, prom = world
    queries = tmp_path / "queries.yaml"
    queries.write_text(
        "templates:\n"
        '  grpc: sum(rate(grpc_server_handled_total{service="$service",grpc_code="OK"}[$window]))'
        ' / sum(rate(grpc_server_handled_total{service="$service"}[$window]))\n'
    )
    app = create_app(
        AnalysisSettings(
            token=SINGLE,
            redact_key=KEY,
            queries_file=str(queries),
            prometheus_url=prom.url,
            timeout=2.0,
            cache_ttl=0,
            argocd=ArgoCDSettings(url=argo.url, token=argo.token),
        )
    )
    status, body = ask(app, "/v1/gates/success-rate?template=grpc&service=checkout&window=1m", SINGLE)
    assert status == 200 and body["observed"]["template"] == "grpc" and "query" not in body["observed"]
    assert prom.queries[-1] == (
        'sum(rate(grpc_server_handled_total{service="checkout",grpc_code="OK"}[1m]))'
        ' / sum(rate(grpc_server_handled_total{service="checkout"}[1m]))'
    )
    for bad in ("templates: {x: 'up{a=\"$job\"}'}", "templates: {X: up}", "templates: []", "{}"):
        queries.write_text(bad)
        with pytest.raises(ConfigError, match="DRIFTGUARD_PROMETHEUS_QUERIES"):
            AnalysisSettings(token=SINGLE, redact_key=KEY, queries_file=str(queries))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "a", "projects": ["*"], "apps": ["*"]}, "exactly one of `token` or `tokenFile`"),
        ({"name": "a", "token": TEAM_A, "tokenFile": "x", "projects": ["*"], "apps": ["*"]}, "exactly one"),
        ({"name": "a", "token": "short", "projects": ["*"], "apps": ["*"]}, "16+ characters"),
        ({"name": "a", "token": TEAM_A, "apps": ["*"]}, "`projects` must be a non-empty list"),
        ({"name": "a", "token": TEAM_A, "projects": ["*"], "apps": []}, "`apps` must be a non-empty list"),
        ({"name": "a", "token": TEAM_A, "projects": ["*"], "apps": ["*"], "groups": []}, "unknown key"),
        ({"token": TEAM_A, "projects": ["*"], "apps": ["*"]}, "`name` is required"),
        ({"name": "a", "tokenFile": "/nonexistent/x", "projects": ["*"], "apps": ["*"]}, "cannot be read"),
    ],
)
def test_a_bad_callers_file_stops_start_up_naming_the_entry(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match="DRIFTGUARD_ANALYSIS_CALLERS") as caught:
        parse_callers({"callers": [entry]})
    assert message in str(caught.value) and TEAM_A not in str(caught.value)


def test_two_callers_may_not_share_a_token_or_a_name(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(f"callers: [{{name: a, token: {TEAM_A}, projects: ['*'], apps: ['*']}}]")
    with pytest.raises(ConfigError, match="another caller's token"):
        load_callers(str(f), single_token=TEAM_A)
    f.write_text(
        f"callers: [{{name: a, token: {TEAM_A}, projects: [x], apps: [x]}},"
        f" {{name: a, token: {TEAM_B}, projects: [x], apps: [x]}}]"
    )
    with pytest.raises(ConfigError, match="used twice"):
        load_callers(str(f))


NAME = st.text(alphabet="abc-", min_size=1, max_size=6)


@settings(max_examples=examples(300), deadline=None)
@given(
    projects=st.lists(NAME, min_size=1, max_size=3),
    apps=st.lists(NAME, min_size=1, max_size=3),
    p=NAME,
    a=NAME,
)
def test_an_entry_matches_when_project_and_name_both_match(
    projects: list[str], apps: list[str], p: str, a: str
) -> None:
    # reference: Argo CD's RBAC on applications matches "<project>/<app>" against each part's glob
    # (argo-cd util/rbac/rbac.go globMatchFunc); for literal globs and "*" that is equality or anything
    pats = [*projects, "*"] if len(projects) > 2 else projects
    caller = Caller("c", TEAM_A, tuple(pats), tuple(apps))
    expected = (("*" in pats) or p in pats) and a in apps
    assert caller.allows(project=p, app=a) is expected


def test_without_callers_or_a_token_start_up_names_both() -> None:
    with pytest.raises(ConfigError, match=r"DRIFTGUARD_ANALYSIS_CALLERS.*DRIFTGUARD_ANALYSIS_TOKEN"):
        AnalysisSettings(redact_key=KEY)
    with pytest.raises(ConfigError, match="DRIFTGUARD_ANALYSIS_TOKEN"):
        AnalysisSettings(token="short", redact_key=KEY)

"""Bad query values and what the probes say (issue 31).

The attacks: ``since=<400 digits>d`` on /v1/incidents and /incidents was an HTTP 500 (the
duration overflowed a float); /openapi.json and /readyz (channel names, the store's error)
answered anyone on the network.
"""

from __future__ import annotations

from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notifier.journal.routes import parse_since
from tests.helpers import examples

from .conftest import READ_TOKEN, TOKEN

READ = {"Authorization": f"Bearer {READ_TOKEN}"}


def test_a_400_digit_duration_is_a_400_with_a_json_error(idapp: Flask) -> None:
    client = idapp.test_client()
    for path in ("/v1/incidents", "/incidents"):
        resp = client.get(f"{path}?since={'9' * 400}d", headers=READ)
        assert resp.status_code == 400, (path, resp.status_code)
        assert "since" in resp.get_json()["error"]
    # a browser still gets the page, with the same message
    page = client.get(f"/incidents?since={'9' * 400}d", headers={**READ, "Accept": "text/html"})
    assert page.status_code == 400 and page.mimetype == "text/html" and b"since" in page.data


@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    since=st.one_of(
        st.text(max_size=30),
        st.from_regex(r"\A[0-9]{1,500}[smhd]\Z"),
        st.sampled_from(
            ["inf", "-inf", "nan", "1e400", "-1e400", "1e300", "0x10", "9" * 5000, "9" * 400 + "d"]
        ),
    ),
    limit=st.one_of(st.text(max_size=8), st.integers().map(str)),
)
def test_no_query_value_is_a_500(idapp: Flask, since: str, limit: str) -> None:
    client = idapp.test_client()
    resp = client.get("/v1/incidents", query_string={"since": since, "limit": limit}, headers=READ)
    assert resp.status_code in (200, 400), (since, limit, resp.status_code)
    assert resp.is_json


@given(digits=st.integers(min_value=1, max_value=10), unit=st.sampled_from("smhd"))
def test_parse_since_reference(digits: int, unit: str) -> None:
    # reference: a duration back from now, never before the epoch
    n = int("7" * digits)
    seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    assert parse_since(f"{n}{unit}", now=1e9) == max(0.0, 1e9 - n * seconds)


def test_probes_say_a_word_without_the_read_token(idapp: Flask) -> None:
    client = idapp.test_client()
    assert client.get("/readyz").get_json() == {"status": "ready"}
    assert client.get("/readyz", headers={"Authorization": f"Bearer {TOKEN}"}).get_json() == {
        "status": "ready"
    }
    detailed = client.get("/readyz", headers=READ).get_json()
    assert detailed["status"] == "ready" and detailed["channels"]
    assert client.get("/openapi.json").status_code == 401
    assert client.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 401
    assert "paths" in client.get("/openapi.json", headers=READ).get_json()
    assert client.get("/healthz").get_json() == {"status": "ok"}

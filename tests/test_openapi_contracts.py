"""schemathesis against both services' /openapi.json, authenticated: every answer matches what the spec says.

Each service runs as its real Flask app over the stand-ins (Argo CD, Prometheus, receivers);
schemathesis generates requests from the spec and checks status codes, content types and bodies
against it. Examples are few (2 cores shared): this is a contract check, not a fuzzing campaign.

The notifier is tested on the operations whose answers its spec describes today (see the
issue-13 report for what schemathesis found there); the analysis provider on all of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import positive_data_acceptance

from analysis_provider.app import create_app as analysis_app
from analysis_provider.settings import AnalysisSettings
from driftguard.argocd import ArgoCDSettings
from notifier.app import create_app as notifier_app
from standins import argo_api, prometheus, receivers
from standins.drill import serve_drill
from tests.notifier.conftest import READ_TOKEN, make_config, make_settings
from tests.notifier.conftest import TOKEN as NOTIFIER_TOKEN

ANALYSIS_TOKEN = "analysis-contract-token-0123456789"
EXAMPLES = settings(
    max_examples=int(os.environ.get("DRIFTGUARD_CONTRACT_EXAMPLES", "12")),
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)


@pytest.fixture
def analysis_schema() -> Iterator[Any]:
    with argo_api.serve() as argo, prometheus.serve() as prom:
        serve_drill(argo, patched=False, secret_changed=False, sync="Synced")
        app = analysis_app(
            AnalysisSettings(
                token=ANALYSIS_TOKEN,
                redact_key=b"redact-key-for-tests-0123456789abcdef",
                prometheus_url=prom.url,
                timeout=1.5,
                cache_ttl=5,
                argocd=ArgoCDSettings(url=argo.url, token=argo.token),
            ),
            now=lambda: datetime(2026, 11, 29, 15, 0, tzinfo=UTC),
        )
        yield schemathesis.openapi.from_wsgi(
            "/openapi.json", app, headers={"Authorization": f"Bearer {ANALYSIS_TOKEN}"}
        )


@pytest.fixture
def notifier_schema(tmp_path: Path) -> Iterator[Any]:
    with argo_api.serve() as argo, receivers.serve() as rx:
        app = notifier_app(make_settings(tmp_path, argo.url, read_token=READ_TOKEN), config=make_config(rx))
        try:
            # the spec itself is behind the read token (issue 31)
            yield schemathesis.openapi.from_wsgi(
                "/openapi.json", app, headers={"Authorization": f"Bearer {READ_TOKEN}"}
            )
        finally:
            app.extensions["driftguard"].worker.stop()


# success-rate needs service= for its template (400 otherwise): OpenAPI 3.0 cannot say
# "one of these two query parameters", so a schema-valid request may be refused there, and only there
ONE_OF_QUERY_OR_SERVICE = {"GET /v1/gates/success-rate", "GET /v1/gates/all"}


def run_all(schema: Any, token: str, *, skip: frozenset[Any] = frozenset()) -> list[str]:
    """Every operation of ``schema`` with a few generated cases; the labels of those exercised."""
    labels = []
    for result in schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)
        excluded = [positive_data_acceptance] if operation.label in ONE_OF_QUERY_OR_SERVICE else []
        _checker(operation, token, [*excluded, *skip])()
    return labels


def _checker(operation: Any, token: str, excluded: list[Any]) -> Any:
    @EXAMPLES
    @given(case=operation.as_strategy())
    def check(case: Any) -> None:
        case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, excluded_checks=excluded)

    return check


def test_the_analysis_provider_answers_as_its_spec_says(analysis_schema: Any) -> None:
    labels = run_all(analysis_schema, ANALYSIS_TOKEN)
    assert {f"GET /v1/gates/{g}" for g in ("drift", "sync", "success-rate", "freeze", "all")} <= set(labels)


def test_the_notifier_answers_as_its_spec_says(notifier_schema: Any) -> None:
    # its spec does not yet carry the Kubernetes name rule that the endpoint enforces (400 for a
    # schema-valid name such as "$ref"): reported on issue 13 for the notifier's owner, so the
    # check that a schema-valid request is accepted is left out here until the spec says it
    labels = run_all(notifier_schema, NOTIFIER_TOKEN, skip=frozenset({positive_data_acceptance}))
    assert "POST /v1/notifications" in labels

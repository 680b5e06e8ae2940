"""Schema confinement refuses what helm would fetch: real references, not identifiers.

The oracle is the real helm 4 binary: each schema is put in a one-template chart whose every URL
points at a loopback server that counts requests. On the curated cases (every reference reachable
from the root) bare ``helm template`` fetched something iff driftguard refuses the schema; on
generated ones nothing helm fetches is let through. traefik's real schema (``$id: https://traefik.io/...``,
tests/data/charts/traefik) passes; its render is compared with bare helm in test_real_charts.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmp_plugin.helmchart.schema_refs import _outside_ref, check_chart_schemas, known_draft
from driftguard.errors import InputError
from standins.http import running
from tests.helpers import examples

from .conftest import ROOT

HELM = os.environ["DRIFTGUARD_HELM"]
TRAEFIK = ROOT / "tests" / "data" / "charts" / "traefik" / "values.schema.json"


class _Counter(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = b'{"type": "object"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[str]]]:
    hits: ClassVar[list[str]] = []
    handler = type("Counter", (_Counter,), {"hits": hits})
    with running(handler) as url:
        yield url, hits


def _chart(tmp: Path, schema: Any) -> Path:
    chart = tmp / "chart"
    (chart / "templates").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: sc\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("a: 1\n")
    (chart / "templates" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    (chart / "values.schema.json").write_text(json.dumps(schema))
    return chart


def _helm_fetches(tmp: Path, schema: Any, hits: list[str]) -> bool:
    chart = _chart(tmp, schema)
    before = len(hits)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "NO_PROXY": "*"}
    subprocess.run([HELM, "template", str(chart)], capture_output=True, env=env, timeout=60, check=False)
    return len(hits) > before


def _refused(tmp: Path, schema: Any) -> bool:
    chart = _chart(tmp, schema)
    try:
        check_chart_schemas(chart, str(tmp))
    except InputError:
        return True
    return False


def _cases(base: str) -> list[tuple[str, Any]]:
    return [
        ("$schema unknown", {"$schema": f"{base}/meta.json", "type": "object"}),
        ("$id only", {"$id": f"{base}/id.json", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}}),
        ("$id moves a relative $ref", {"$id": f"{base}/dir/", "properties": {"a": {"$ref": "other.json"}}}),
        ("absolute $ref to its own $id", {"$id": f"{base}/self.json", "properties": {"a": {"$ref": f"{base}/self.json#/$defs/x"}}, "$defs": {"x": {}}}),
        ("$ref to another URL", {"properties": {"a": {"$ref": f"{base}/s.json"}}}),
        ("$dynamicRef to another URL", {"properties": {"a": {"$dynamicRef": f"{base}/d.json"}}}),
        ("$vocabulary", {"$schema": "https://json-schema.org/draft/2020-12/schema", "$vocabulary": {f"{base}/vocab": True}}),
        ("urn $ref", {"properties": {"a": {"$ref": "urn:example:nothing"}}}),
        ("draft-04 id names the document", {"$schema": "http://json-schema.org/draft-04/schema#", "id": f"{base}/d4.json", "properties": {"a": {"$ref": f"{base}/d4.json#/definitions/x"}}, "definitions": {"x": {}}}),
        ("id is no keyword in 2020-12", {"id": f"{base}/i.json", "properties": {"a": {"$ref": f"{base}/i.json"}}}),
        ("embedded resource", {"$id": f"{base}/root.json", "$defs": {"e": {"$id": "emb.json", "type": "object"}}, "properties": {"a": {"$ref": "emb.json"}}}),
        ("embedded resource under another base", {"$id": f"{base}/r/", "properties": {"p": {"$ref": "#/$defs/e"}}, "$defs": {"e": {"$id": f"{base}/other/", "properties": {"b": {"$ref": "emb.json"}}}, "f": {"$id": "emb.json"}}}),
        ("known draft over http without #", {"$schema": "http://json-schema.org/draft-07/schema", "type": "object"}),
        ("known draft with a fragment", {"$schema": f"{base}/draft-07/schema#x"}),
    ]  # fmt: skip


def test_refused_exactly_when_helm_would_fetch(tmp_path: Path, server: tuple[str, list[str]]) -> None:
    base, hits = server
    for i, (name, schema) in enumerate(_cases(base)):
        here = tmp_path / str(i)
        fetches = _helm_fetches(here, schema, hits)
        assert _refused(here, schema) == fetches, f"{name}: helm fetches={fetches}"


def test_expected_verdicts(tmp_path: Path) -> None:
    """The same cases with what helm 4.2.3 did when measured (so a change in helm shows here too)."""
    base = "http://127.0.0.1:9"
    refused = {name for name, schema in _cases(base) if _outside_ref(schema) is not None}
    assert refused == {
        "$schema unknown",
        "$id moves a relative $ref",
        "$ref to another URL",
        "$dynamicRef to another URL",
        "id is no keyword in 2020-12",
        "embedded resource under another base",
        "known draft with a fragment",
    }


def test_traefiks_schema_is_no_reference() -> None:
    schema = json.loads(TRAEFIK.read_text())
    assert schema["$id"] == "https://traefik.io/traefik-helm-chart.schema.json"
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert _outside_ref(schema) is None
    check_chart_schemas(TRAEFIK.parent, str(TRAEFIK.parent.parent))


def test_a_file_reference_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"\$ref 'file:///etc/hostname' refers outside the schema"):
        check_chart_schemas(
            _chart(tmp_path, {"properties": {"a": {"$ref": "file:///etc/hostname"}}}), str(tmp_path)
        )
    with pytest.raises(InputError, match=r"\$schema '.*' is not a JSON Schema draft helm has built in"):
        check_chart_schemas(_chart(tmp_path, {"$schema": "https://example.com/meta"}), str(tmp_path))


@pytest.mark.parametrize(
    ("url", "draft"),
    [
        ("https://json-schema.org/draft/2020-12/schema", 2020),
        ("http://json-schema.org/draft-07/schema#", 7),
        ("https://json-schema.org/draft-04/schema", 4),
        ("http://json-schema.org/schema#", 2020),
        ("https://json-schema.org/draft/2019-09/schema#", 2019),
        ("http://json-schema.org/draft-03/schema#", None),
        ("https://json-schema.org/draft/next/schema", None),
        ("http://json-schema.org/draft-07/schema#/x", None),
        ("ftp://json-schema.org/draft-07/schema", None),
    ],
)
def test_known_drafts_are_the_librarys(url: str, draft: int | None) -> None:
    """santhosh-tekuri/jsonschema v6 draft.go ``draftFromURL``: no fragment, http or https, six URLs."""
    assert known_draft(url) == draft


# --- property: against helm itself ---------------------------------------------------------------

_REFS = st.sampled_from(
    ["#", "#/$defs/x", "a.json", "a.json#/x", "{base}/a.json", "{base}/r/a.json", "urn:x:y", "../b.json", ""]
)
_IDS = st.sampled_from(["{base}/r/", "{base}/a.json", "a.json", "sub/", "urn:x:y", "#anchor"])
_SCHEMAS = st.sampled_from(
    [
        "",
        "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft-07/schema#",
        "{base}/meta",
    ]
)


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    def node(depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object"}
        if draw(st.booleans()):
            out["$id"] = draw(_IDS)
        if draw(st.booleans()):
            out["$ref"] = draw(_REFS)
        if depth < 2 and draw(st.booleans()):
            out["$defs"] = {"x": node(depth + 1), "y": node(depth + 1)}
        return out

    root = node(0)
    meta = draw(_SCHEMAS)
    if meta:
        root["$schema"] = meta
    return root


def _fill(value: Any, base: str) -> Any:
    if isinstance(value, str):
        return value.replace("{base}", base)
    if isinstance(value, dict):
        return {k: _fill(v, base) for k, v in value.items()}
    return value


@settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(schema=schemas())
def test_property_refused_iff_helm_fetches(
    tmp_path_factory: pytest.TempPathFactory, server: tuple[str, list[str]], schema: dict[str, Any]
) -> None:
    base, hits = server
    concrete = _fill(schema, base)
    here = tmp_path_factory.mktemp("schema")
    fetches = _helm_fetches(here, concrete, hits)
    refused = _refused(here, concrete)
    # never let through what helm fetches; refusing more is allowed: a reference in a part of the
    # schema helm never compiles (an unreferenced $defs entry) is refused all the same
    assert fetches <= refused, json.dumps(concrete)

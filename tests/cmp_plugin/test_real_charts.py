"""Real charts the project did not write (tests/data, see SOURCES.md) render as bare helm renders them.

A representative slice of the development corpus (`make corpus` runs all of it): metrics-server
with each of its ci/*.yaml values, and the prometheus-operator CRDs whose enum holds a plain
``- =`` (PyYAML's ``!!value``: the render could not be read at all before driftguard read YAML
as Argo CD's Go YAML does), and traefik, whose values schema carries an ``$id`` URL.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cmp_plugin.scan import keys_of, scan_stream
from driftguard.manifests import load_stream, resource_key
from tests.helpers import run_cmp

from .conftest import ROOT, cmp_env

DATA = ROOT / "tests" / "data" / "charts"
HELM = os.environ["DRIFTGUARD_HELM"]

CASES = [("metrics-server", None)] + [
    ("metrics-server", f"ci/{p.name}") for p in sorted((DATA / "metrics-server" / "ci").glob("*.yaml"))
]
CASES += [("prometheus-operator-crds", None)]
# traefik's values.schema.json names itself ("$id": "https://traefik.io/traefik-helm-chart.schema.json"):
# an identifier, no reference; the chart renders (cmp_plugin/helmchart/schema_refs.py)
CASES += [("traefik", None)]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("real") / "checkout"
    shutil.copytree(DATA, dest)
    return dest


def _objects(text: str) -> list[str]:
    return sorted(json.dumps(d.obj, sort_keys=True) for d in load_stream(text, require_identity=False))


def _ident(obj_json: str) -> str:
    obj = json.loads(obj_json)
    return f"{obj['kind']}/{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def _stable(text: str, unstable: set[str]) -> list[str]:
    return sorted(_ident(o) if _ident(o) in unstable else o for o in _objects(text))


@pytest.mark.slow  # real charts
@pytest.mark.parametrize(("chart", "values"), CASES, ids=[f"{c}[{v or 'default'}]" for c, v in CASES])
def test_real_chart_renders_like_bare_helm(checkout: Path, chart: str, values: str | None) -> None:
    params = [{"name": "values-files", "array": [values]}] if values else None
    env = {**cmp_env(chart, params), "DRIFTGUARD_CMP_CACHE_DIR": str(checkout.parent / "cache")}
    proc = run_cmp(checkout / chart, env, "generate")
    assert proc.returncode == 0, proc.stderr
    argv = [HELM, "template", ".", "--name-template", chart, "--namespace", "apps"]
    argv += ["--kube-version", env["KUBE_VERSION"]] + (["--values", values] if values else [])
    for api in env["KUBE_API_VERSIONS"].split(","):
        argv += ["--api-versions", api]
    bare, again = (
        subprocess.run(
            [*argv, "--include-crds"],
            cwd=checkout / chart,
            env={"PATH": os.environ["PATH"], "HOME": str(checkout.parent)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for _ in range(2)
    )
    # genCA / randAlphaNum differ between any two renders: those objects compare by identity
    unstable = {_ident(o) for o in set(_objects(bare)) ^ set(_objects(again))}
    if not unstable:
        assert proc.stdout == bare
    assert _stable(proc.stdout, unstable) == _stable(bare, unstable) and _objects(bare)
    # the identities the guards used are the ones the full parser reads
    docs = load_stream(bare, require_identity=False)
    parsed = [resource_key(d.obj, default_namespace="apps") for d in docs]
    assert keys_of(scan_stream(bare), default_namespace="apps") == parsed


def test_the_alertmanagerconfig_enum_reads_as_go_reads_it(checkout: Path) -> None:
    text = (checkout / "prometheus-operator-crds/crds/crd-alertmanagerconfigs.yaml").read_text()
    assert "\n                            - =\n" in text  # the plain scalar itself, as upstream ships it
    (crd,) = load_stream(text)
    enums: list[list[object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("enum"), list):
                enums.append(node["enum"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(crd.obj)
    assert ["!=", "=", "=~", "!~"] in enums

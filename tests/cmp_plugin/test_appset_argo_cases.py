"""Argo CD's own ApplicationSet test tables, ported as data (tests/data/appset/argo_cases.json).

Each case names its Go test and file (tests/data/appset/SOURCES.md says which were ported and
which were not, and why). The harness calls the same functions the diff uses.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from cmp_plugin.prcheck.appset import AppSetError, Context
from cmp_plugin.prcheck.appset.applications import _render_app
from cmp_plugin.prcheck.appset.base import Cluster, Generated
from cmp_plugin.prcheck.appset.git import (
    dir_params,
    file_param_sets,
    filter_directories,
    go_dir_params,
    normalize_url,
)
from cmp_plugin.prcheck.appset.gotemplate import GoTemplates
from cmp_plugin.prcheck.appset.listgen import ListGenerator
from cmp_plugin.prcheck.appset.template import render, render_each
from cmp_plugin.prcheck.appset.transform import transform
from cmp_plugin.prcheck.appset.values import add_values, apply_values

REPO_URL = "https://git.example.com/platform/gitops.git"
DATA = Path(__file__).resolve().parents[1] / "data" / "appset" / "argo_cases.json"
CASES: list[dict[str, Any]] = json.loads(DATA.read_text())


def ctx(tmp: Path | None = None, clusters: list[dict[str, Any]] | None = None) -> Context:
    return Context(
        appset="set",
        tree=tmp or Path("/nonexistent"),
        repo_urls=frozenset({normalize_url(REPO_URL)}),
        clusters=[Cluster(**c) for c in clusters] if clusters is not None else None,
    )


def replace_go(c: Context, engine: GoTemplates) -> Context:
    return dataclasses.replace(c, go=engine)


def run(case: dict[str, Any], tmp: Path) -> Any:
    kind = case["kind"]
    if kind == "template":
        return render(case["template"], case["params"])
    if kind == "gotemplate":
        engine = GoTemplates(
            helm=os.environ["DRIFTGUARD_HELM"], timeout=60, options=tuple(case["options"]), appset="set"
        )
        return render_each(case["template"], [case["params"]], replace_go(ctx(), engine))[0]
    if kind == "git_file_go":
        engine = GoTemplates(helm=os.environ["DRIFTGUARD_HELM"], timeout=60, options=(), appset="set")
        sets = [
            Generated(p, ()) for p in file_param_sets(case["path"], case["content"], case["prefix"], go=True)
        ]
        return [g.params for g in apply_values(sets, case["values"], replace_go(ctx(), engine))]
    if kind == "finalizers":
        tmpl = {"metadata": {"name": "app"}, "spec": {"project": ""}}
        if case["finalizers"] is not None:
            tmpl["metadata"]["finalizers"] = case["finalizers"]
        preserve = bool((case["syncPolicy"] or {}).get("preserveResourcesOnDeletion"))
        return _render_app(tmpl, case["params"], preserve)["metadata"].get("finalizers")
    if kind == "git_file":
        return file_param_sets(case["path"], case["content"], case["prefix"])
    if kind == "git_directories":
        chosen, _ = filter_directories(case["directories"], case["repoApps"])
        return [add_values(dir_params(p, case["prefix"]), case["values"], ctx()) for p in chosen]
    if kind == "git_directories_go":
        chosen, _ = filter_directories(case["directories"], case["repoApps"])
        return [go_dir_params(p, case["prefix"]) for p in chosen]
    if kind == "list":
        return [g.params for g in ListGenerator().generate({"elements": case["elements"]}, ctx())]
    if kind == "clusters":
        return [g.params for g in transform({"clusters": case["generator"]}, ctx(clusters=case["clusters"]))]
    if kind == "generators":
        for d in case.get("tree", []):
            (tmp / d).mkdir(parents=True)
        return [g.params for g in transform(case["generator"], ctx(tmp, clusters=case.get("clusters")))]
    raise AssertionError(f"unknown case kind {kind}")


@pytest.mark.parametrize("case", CASES, ids=[f"{c['go_test']}/{c['name']}" for c in CASES])
def test_argo_case(case: dict[str, Any], tmp_path: Path) -> None:
    if "error" in case:
        with pytest.raises(Exception) as info:
            run(case, tmp_path)
        if isinstance(case["error"], str):
            assert case["error"] in str(info.value)
        return
    got = run(case, tmp_path)
    if case["kind"] in ("list", "clusters", "generators"):
        key = lambda p: json.dumps(p, sort_keys=True)  # noqa: E731 - Argo compares these unordered
        assert sorted(got, key=key) == sorted(case["expect"], key=key)
    else:
        assert got == case["expect"]


def test_every_case_names_its_upstream_test() -> None:
    assert len(CASES) >= 30
    for case in CASES:
        assert case["source"].startswith("applicationset/") and case["go_test"].startswith("Test")


@pytest.mark.parametrize(
    "text",
    [
        '{{ end }}{{ .Files.Get "values.json" }}',
        "{{ if .a }}x",
        '{{ define "t0" }}x{{ end }}',
        '{{ template "t0" . }}',
    ],
)
def test_a_go_template_cannot_leave_its_define(text: str) -> None:
    engine = GoTemplates(helm=os.environ["DRIFTGUARD_HELM"], timeout=60, options=(), appset="set")
    with pytest.raises(AppSetError, match=r"goTemplate: (unbalanced|the `(define|template)` action)"):
        engine.render_many([(text, {"a": "b"})])

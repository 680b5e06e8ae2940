"""Every ApplicationSet the tests and examples use fits Argo CD v3.5.1's ApplicationSet CRD."""

from __future__ import annotations

import functools
from typing import Any

import jsonschema
import pytest
import yaml

from tests.manifests.reference import crd_schema

from .gitrepo import POSTMORTEM, appset, git_dirs

CRD = "argo-cd/applicationset-crd.yaml"


@functools.cache
def validator() -> Any:
    """One validator for the whole module: checking the large CRD schema itself on every call is slow."""
    schema = crd_schema(CRD, "v1alpha1")
    return jsonschema.validators.validator_for(schema)(schema)


def validate(obj: dict[str, Any], crd: str, version: str) -> None:
    assert (crd, version) == (CRD, "v1alpha1")
    validator().validate(obj)


FIXTURES: dict[str, dict[str, Any]] = {
    "postmortem": yaml.safe_load((POSTMORTEM / "apps/payment.yaml").read_text()),
    "teams": appset(
        "teams",
        [git_dirs("teams/*", exclude=("teams/omega",))],
        app_name="team-{{path.basename}}",
        path="{{path}}",
    ),
    "preserve": appset(
        "teams",
        [git_dirs("teams/*")],
        app_name="t",
        path="p",
        syncPolicy={"preserveResourcesOnDeletion": True, "applicationsSync": "create-update"},
    ),
    "matrix": appset(
        "fleet",
        [
            {
                "matrix": {
                    "generators": [
                        {"clusters": {"selector": {"matchLabels": {"env": "production"}}}},
                        git_dirs("teams/*"),
                    ]
                }
            }
        ],
        app_name="{{path.basename}}-{{name}}",
        path="{{path}}",
    ),
    "list-selector": appset(
        "gold",
        [
            {
                "list": {"elements": [{"team": "alpha", "tier": "gold"}]},
                "selector": {"matchLabels": {"tier": "gold"}},
            }
        ],
        app_name="gold-{{team}}",
        path="teams/{{team}}",
    ),
    "merge-files": appset(
        "merged",
        [
            {
                "merge": {
                    "mergeKeys": ["name"],
                    "generators": [
                        {"clusters": {"values": {"tier": "std"}}},
                        {
                            "git": {
                                "repoURL": "https://git.example.com/platform/gitops.git",
                                "revision": "HEAD",
                                "files": [{"path": "clusters/*.json"}],
                            }
                        },
                    ],
                }
            }
        ],
        app_name="{{name}}",
        path="apps/{{name}}",
        templatePatch='spec:\n  project: "{{values.tier}}"\n',
    ),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_fits_the_crd(name: str) -> None:
    validate(FIXTURES[name], CRD, "v1alpha1")


def test_the_crd_check_has_teeth() -> None:
    bad = appset("x", [git_dirs("a/*")], app_name="x", path="p")
    bad["spec"]["generators"] = {"git": {}}
    with pytest.raises(jsonschema.ValidationError):
        validate(bad, CRD, "v1alpha1")

"""The parameter table is the one source: plugin.yaml, the docs and the parsing agree with it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.params import PARAMETERS, env_name
from cmp_plugin.plugin_yaml import parameters_doc, plugin_config, plugin_config_map
from driftguard.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def test_committed_plugin_yaml_is_generated_from_the_table() -> None:
    committed = (ROOT / "manifests/base/cmp/plugin.yaml").read_text()
    assert committed == plugin_config_map(), (
        "run: driftguard-cmp plugin-yaml > manifests/base/cmp/plugin.yaml"
    )
    inner = yaml.safe_load(yaml.safe_load(committed)["data"]["plugin.yaml"])
    assert inner == plugin_config()
    assert inner["spec"]["generate"]["command"] == ["driftguard-cmp", "generate"]


def test_committed_docs_are_generated_from_the_table() -> None:
    committed = (ROOT / "docs/cmp-parameters.md").read_text()
    assert committed == parameters_doc(), (
        "regenerate docs/cmp-parameters.md from cmp_plugin.plugin_yaml.parameters_doc()"
    )
    for p in PARAMETERS:
        assert f"`{p.name}`" in committed


def test_issue_contract_names_exist() -> None:
    names = {p.name for p in PARAMETERS}
    assert {
        "values-files",
        "values",
        "release-name",
        "namespace",
        "include-crds",
        "allow-empty",
        "renderer",
    } <= names


def test_defaults_match_the_announcements() -> None:
    params, explicit = parse_parameters({})
    assert explicit == frozenset()
    for p in PARAMETERS:
        announced = p.announcement()
        raw = announced.get("string", announced.get("array", announced.get("map")))
        assert p.parse(raw, origin="default") == params[p.name], p.name


def test_precedence_app_over_plugin_env_over_default() -> None:
    env = {
        "ARGOCD_ENV_DRIFTGUARD_VALUES_FILES": "[a.yaml, b.yaml]",
        "ARGOCD_ENV_DRIFTGUARD_ALLOW_EMPTY": "true",
        "ARGOCD_APP_PARAMETERS": '[{"name": "allow-empty", "string": "false"}]',
        "ARGOCD_APP_NAME": "ns1_web",
    }
    app = AppEnv.from_environ(env)
    assert app.param("values-files") == ["a.yaml", "b.yaml"]
    assert app.param("allow-empty") is False
    assert app.release_name == "web"
    assert app.explicit == {"values-files", "allow-empty"}


def test_param_arrays_from_env_vars() -> None:
    env = {"PARAM_VALUES_FILES_1": "b.yaml", "PARAM_VALUES_FILES_0": "a.yaml", "PARAM_VALUES": "x: 1"}
    params, _ = parse_parameters(env)
    assert params["values-files"] == ["a.yaml", "b.yaml"] and params["values"] == "x: 1"
    assert env_name("values-files") == "VALUES_FILES"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ARGOCD_ENV_DRIFTGUARD_NOPE": "1"}, "unknown plugin env variable"),
        ({"ARGOCD_APP_PARAMETERS": '[{"name": "values-files", "string": "a"}]'}, "must be given as `array:`"),
        ({"ARGOCD_APP_PARAMETERS": '{"name": "x"}'}, "must be a JSON array"),
        ({"ARGOCD_APP_PARAMETERS": '[{"string": "x"}]'}, "needs a name"),
        ({"PARAM_MAX_PRUNE_RATIO": "1.5"}, "between 0 and 1"),
        ({"PARAM_MAX_PRUNE_COUNT": "-1"}, "whole number"),
        ({"PARAM_MAX_PRUNE_COUNT": "many"}, "must be a number"),
    ],
)
def test_bad_parameters(env: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_parameters(env)

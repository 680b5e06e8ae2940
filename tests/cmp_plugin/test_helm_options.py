"""Argo CD's native helm options as plugin parameters, each rendering exactly as bare helm with Argo CD's flags.

The flags and their order are util/helm/cmd.go's (``template``, argo-cd v3.5.1): --name-template,
--namespace, --kube-version, --set, --set-string, --set-file, --values, --api-versions,
--include-crds unless skipCrds, --skip-schema-validation, --skip-tests; values with commas are
escaped as its ``cleanSetParameters`` does; ignoreMissingValueFiles drops absent files
(reposerver/repository/repository.go, ``getResolvedValueFiles``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import Generate, cmp_env
from .test_parity import HELM, bare

APP = "charts/options"


def _argo_argv(
    repo: Path,
    *,
    kube: str | None = None,
    apis: list[str] | None = None,
    flags: tuple[str, ...] | list[str] = (),
    crds: bool = True,
) -> list[str]:
    env = cmp_env(APP)
    argv = [HELM, "template", ".", "--name-template", "options", "--namespace", "apps"]
    argv += ["--kube-version", kube or env["KUBE_VERSION"], *flags]
    for api in apis or env["KUBE_API_VERSIONS"].split(","):
        argv += ["--api-versions", api]
    return [*argv, "--include-crds"] if crds else argv


def _render(generate: Generate, params: list[dict[str, Any]]) -> str:
    proc = generate(APP, params)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_set_set_string_and_set_file(generate: Generate, repo: Path) -> None:
    params = [
        {"name": "set", "map": {"replicas": "3", "a\\.b": "x,y", "list": "{1,2}"}},
        {"name": "set-string", "map": {"name": "0123", "flag": "true"}},
        {"name": "set-file", "map": {"file": "files/banner.txt"}},
    ]
    out = _render(generate, params)
    banner = repo / APP / "files/banner.txt"
    flags = ["--set", "a\\.b=x\\,y", "--set", "list={1,2}", "--set", "replicas=3"]
    flags += ["--set-string", "flag=true", "--set-string", "name=0123", "--set-file", f"file={banner}"]
    assert out == bare([*_argo_argv(repo, flags=flags)], repo / APP)
    # and what that means: typed, kept as strings, one key with a comma, a list, the file's text
    for line in (
        'replicas: "3"',
        'name: "\\"0123\\""',
        'flag: "\\"true\\""',
        'dotted: "\\"x,y\\""',
        'list: "[1,2]"',
    ):
        assert line in out, line
    assert 'file: "hello, from a file\\n"' in out


def test_skip_crds_and_skip_tests(generate: Generate, repo: Path) -> None:
    out = _render(
        generate, [{"name": "skip-crds", "string": "true"}, {"name": "skip-tests", "string": "true"}]
    )
    assert out == bare([*_argo_argv(repo, flags=[], crds=False), "--skip-tests"], repo / APP)
    assert "CustomResourceDefinition" not in out and "helm.sh/hook: test" not in out
    assert "CustomResourceDefinition" in _render(generate, [])


def test_skip_schema_validation(generate: Generate, repo: Path) -> None:
    bad = [{"name": "values-files", "array": ["bad-values.yaml"]}]
    refused = generate(APP, bad)
    assert refused.returncode == 2 and "schema" in refused.stderr.lower()
    out = _render(generate, [*bad, {"name": "skip-schema-validation", "string": "true"}])
    expected = _argo_argv(repo, flags=["--values", str(repo / APP / "bad-values.yaml")])
    assert out == bare([*expected, "--skip-schema-validation"], repo / APP)
    assert 'replicas: "\\"many\\""' in out


def test_ignore_missing_values_files(generate: Generate, repo: Path) -> None:
    files = ["absent.yaml", "../../envs/prod-web.yaml", "gone/also.yaml"]
    params = [{"name": "values-files", "array": files}]
    assert generate(APP, params).returncode == 2
    out = _render(generate, [*params, {"name": "ignore-missing-values-files", "string": "true"}])
    assert out == bare(_argo_argv(repo, flags=["--values", "../../envs/prod-web.yaml"]), repo / APP)


def test_kube_version_and_api_versions(generate: Generate, repo: Path) -> None:
    params = [
        {"name": "kube-version", "string": "v1.30.2-eks-1234"},
        {"name": "api-versions", "array": ["v1", "monitoring.coreos.com/v1"]},
    ]
    out = _render(generate, params)
    assert out == bare(_argo_argv(repo, kube="1.30.2", apis=["v1", "monitoring.coreos.com/v1"]), repo / APP)
    assert 'kube: "v1.30.2"' in out and 'monitoring: "true"' in out


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            [{"name": "set-file", "map": {"file": "../../../../etc/passwd"}}],
            "outside the repository checkout",
        ),
        ([{"name": "set-file", "map": {"file": "/etc/passwd"}}], "absolute paths are not allowed"),
        ([{"name": "set-file", "map": {"file": "files/banner.txt,other=/etc/passwd"}}], "holds a ','"),
        ([{"name": "set-file", "map": {"a=/etc/passwd,b": "files/banner.txt"}}], "neither ',' nor '='"),
        ([{"name": "set", "map": {"a,b": "1"}}], "neither ',' nor '='"),
        ([{"name": "set-string", "map": {"": "1"}}], "non-empty"),
        ([{"name": "kube-version", "string": "latest"}], "not a Kubernetes version"),
        ([{"name": "api-versions", "array": ["apps/v1 --set x=1"]}], "not an API version"),
        (
            [
                {"name": "values-files", "array": ["../../../../outside.yaml"]},
                {"name": "ignore-missing-values-files", "string": "true"},
            ],
            "outside the repository checkout",
        ),
    ],
)
def test_nothing_outside_the_checkout_is_read(
    generate: Generate, params: list[dict[str, Any]], message: str
) -> None:
    proc = generate(APP, params)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_the_parameters_are_announced(generate: Generate) -> None:
    import json

    proc = generate(APP, command="parameters")
    names = {p["name"] for p in json.loads(proc.stdout)}
    assert {
        "set",
        "set-string",
        "set-file",
        "skip-crds",
        "skip-schema-validation",
        "skip-tests",
        "ignore-missing-values-files",
        "kube-version",
        "api-versions",
    } <= names


def test_helm_itself_would_split_an_unescaped_comma(repo: Path) -> None:
    # why the escaping is needed: bare helm reads "x,y" as two assignments
    proc = subprocess.run(
        [HELM, "template", ".", "--set", "a\\.b=x,y"],
        cwd=repo / APP,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0

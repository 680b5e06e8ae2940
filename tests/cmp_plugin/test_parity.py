"""Parity with native Argo CD: generate prints exactly what the bare tool prints with Argo CD's flags."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from .conftest import Generate, cmp_env

HELM = os.environ["DRIFTGUARD_HELM"]
KUBECTL = os.environ["DRIFTGUARD_KUSTOMIZE"]


def bare(argv: list[str], cwd: Path) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd.parent),
        "HELM_CACHE_HOME": str(cwd.parent / ".hc"),
        "HELM_CONFIG_HOME": str(cwd.parent / ".hcfg"),
        "HELM_DATA_HOME": str(cwd.parent / ".hd"),
    }
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def objects(text: str) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_helm_chart_with_dependencies_values_files_and_inline_values(generate: Generate, repo: Path) -> None:
    params = [
        {"name": "values-files", "array": ["../../envs/prod-web.yaml"]},
        {"name": "values", "string": "image: registry.example.com/web:2.0\n"},
    ]
    proc = generate("charts/web", params)
    assert proc.returncode == 0, proc.stderr
    # the file:// dependency was missing and got built; the vendored one was used as it is
    assert list((repo / "charts/web/charts").glob("common-1.0.0.tgz"))
    inline = repo / "inline.yaml"
    inline.write_text("image: registry.example.com/web:2.0\n")
    env = cmp_env("charts/web")
    apis = [a for v in env["KUBE_API_VERSIONS"].split(",") for a in ("--api-versions", v)]
    expected = bare(
        [
            HELM,
            "template",
            ".",
            "--name-template",
            "web",
            "--namespace",
            "apps",
            "--kube-version",
            "1.32.3",
            "--values",
            "../../envs/prod-web.yaml",
            "--values",
            str(inline),
            *apis,
            "--include-crds",
        ],
        repo / "charts/web",
    )
    assert proc.stdout == expected
    kinds = sorted(o["kind"] for o in objects(proc.stdout))  # type: ignore[type-var]
    assert kinds == ["ConfigMap", "Deployment", "Ingress", "StatefulSet"]
    deploy = next(o for o in objects(proc.stdout) if o["kind"] == "Deployment")
    assert deploy["spec"]["replicas"] == 5  # type: ignore[index]
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/web:2.0"  # type: ignore[index]


def test_helm_crds_hooks_lists_cluster_scope_and_capabilities(generate: Generate, repo: Path) -> None:
    apis = "v1,apps/v1,batch/v1,monitoring.coreos.com/v1"
    proc = generate("charts/platform", KUBE_API_VERSIONS=apis)
    assert proc.returncode == 0, proc.stderr
    argv = [
        HELM,
        "template",
        ".",
        "--name-template",
        "platform",
        "--namespace",
        "apps",
        "--kube-version",
        "1.32.3",
    ]
    argv += [x for a in apis.split(",") for x in ("--api-versions", a)] + ["--include-crds"]
    assert proc.stdout == bare(argv, repo / "charts/platform")
    kinds = [o["kind"] for o in objects(proc.stdout)]
    assert (
        "CustomResourceDefinition" in kinds
        and "ServiceMonitor" in kinds
        and "List" in kinds
        and "Job" in kinds
    )
    assert "--kube=v1.32.3" in proc.stdout


def test_helm_without_crds(generate: Generate) -> None:
    proc = generate("charts/platform", [{"name": "include-crds", "string": "false"}])
    assert proc.returncode == 0, proc.stderr
    assert "CustomResourceDefinition" not in proc.stdout


def test_release_name_strips_the_app_namespace_prefix(generate: Generate) -> None:
    proc = generate("charts/web", ARGOCD_APP_NAME="team-a_web-prod")
    assert proc.returncode == 0, proc.stderr
    assert "name: web-prod-web" in proc.stdout and "team-a" not in proc.stdout


def test_kustomize_overlay(generate: Generate, repo: Path) -> None:
    proc = generate("overlays/prod")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == bare(
        [KUBECTL, "kustomize", ".", "--load-restrictor", "LoadRestrictionsRootOnly"], repo / "overlays/prod"
    )
    names = {(o["kind"], o["metadata"]["name"], o["metadata"]["namespace"]) for o in objects(proc.stdout)}  # type: ignore[index]
    assert names == {("Deployment", "prod-api", "api-prod"), ("Service", "prod-api", "api-prod")}


def test_directory_yaml_and_json(generate: Generate, repo: Path) -> None:
    proc = generate("plain")
    assert proc.returncode == 0, proc.stderr
    got = objects(proc.stdout)
    expected = []
    for path in sorted((repo / "plain").iterdir()):  # the top level only, as Argo CD without recurse
        if path.suffix in (".yaml", ".yml"):
            expected += objects(path.read_text())
        elif path.suffix == ".json":
            expected.append(json.loads(path.read_text()))
    assert got == expected
    assert [o["metadata"]["name"] for o in got] == ["flow", "flow-secret", "from-json", "plain"]  # type: ignore[index]


def test_discover_and_parameters(generate: Generate, repo: Path) -> None:
    assert generate("charts/web", command="discover").stdout.strip() == "helm"
    assert generate("overlays/prod", command="discover").stdout.strip() == "kustomize"
    assert generate("plain", command="discover").stdout.strip() == "directory"
    (repo / "empty-dir").mkdir()
    out = generate("empty-dir", command="discover")
    assert (out.returncode, out.stdout) == (0, "")
    announced = json.loads(
        generate("charts/web", [{"name": "values-files", "array": ["a.yaml"]}], command="parameters").stdout
    )
    by_name = {a["name"]: a for a in announced}
    assert by_name["values-files"] == {
        **by_name["values-files"],
        "collectionType": "array",
        "array": ["a.yaml"],
    }
    assert by_name["allow-empty"]["string"] == "false"
    assert by_name["include-crds"]["string"] == "true"


def test_kustomize_load_restrictor_parameter(generate: Generate, repo: Path) -> None:
    overlay = repo / "overlays" / "loose"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources:\n  - ../base/service.yaml\n"
    )  # a file outside the overlay
    refused = generate("overlays/loose")
    assert refused.returncode == 2 and refused.stderr.startswith("driftguard: error: kustomize build failed")
    assert "security" in refused.stderr or "restrict" in refused.stderr.lower()
    # the Application cannot open it (issue 14: Argo CD takes it from argocd-cm only) ...
    tenant = generate(
        "overlays/loose", [{"name": "kustomize-load-restrictor", "string": "LoadRestrictionsNone"}]
    )
    assert tenant.returncode == 3 and tenant.stderr.startswith("driftguard: refused by policy")
    # ... the sidecar's own setting can, like kustomize.buildOptions
    proc = generate("overlays/loose", DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR="LoadRestrictionsNone")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == bare(
        [KUBECTL, "kustomize", ".", "--load-restrictor", "LoadRestrictionsNone"], overlay
    )

"""The PR check names the fields that change: readable path, old -> new, Secrets masked, values shortened.

Real git, helm and kustomize: the post-mortem's layout (examples/postmortem) for the replicas PR,
and a kustomize overlay with a configMapGenerator and a secretGenerator whose renamed maps must be
one change of their keys, not a removal that --fail-on-removal blocks.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from driftguard.readable import VALUE_CHARS

from .gitrepo import Repo, payment_repo
from .prcheck import environments, run_diff, validated

PRODUCTION_VALUES = "clusters/production/payment/payment/values.yaml"


def test_the_replicas_pr_names_the_field_and_both_values(tmp_path: Path) -> None:
    repo = payment_repo(tmp_path / "gitops")
    base = repo.commit("base")
    values = repo.path / PRODUCTION_VALUES
    values.write_text(values.read_text().replace("replicas: 6", "replicas: 9"))
    head = repo.commit("payment: 9 replicas in production")

    text = run_diff(repo.path, base, head, "apps/", "--fail-on-removal", "*production*")
    assert text.returncode == 0, text.stderr
    assert (
        "  CHANGED  Deployment.apps payment-production/payment-production\n           spec.replicas: 6 -> 9\n"
    ) in text.stdout
    md = run_diff(repo.path, base, head, "apps/", "--format", "markdown").stdout
    assert (
        "- **changed** `Deployment.apps payment-production/payment-production`\n  - `spec.replicas`: `6` -> `9`"
        in md
    )
    doc = validated(run_diff(repo.path, base, head, "apps/", "--format", "json").stdout)
    prod = environments(doc)["payment-production"]
    [changed] = prod["changed"]
    assert changed["resource"] == "Deployment.apps payment-production/payment-production"
    assert changed["fields"] == [
        {"path": "spec.replicas", "pointer": "/spec/replicas", "op": "replace", "old": "6", "new": "9"}
    ]
    assert prod["counts"] == {"removed": 0, "added": 0, "changed": 1, "renamed": 0, "overwrites": None}
    assert environments(doc)["payment-staging"]["changed"] == []


def kustomize_app(repo: Repo, *, level: str, password: str, banner: str, plain_secret: str) -> None:
    app = "envs/production"
    repo.write(
        f"{app}/kustomization.yaml",
        {
            "namespace": "shop",
            "resources": ["deployment.yaml", "secret.yaml"],
            "configMapGenerator": [
                {"name": "app-config", "literals": [f"LOG_LEVEL={level}", f"BANNER={banner}"]}
            ],
            "secretGenerator": [{"name": "db", "literals": [f"password={password}"]}],
        },
    )
    repo.write(
        f"{app}/deployment.yaml",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "web",
                                "image": "registry.example.com/web:1",
                                "envFrom": [
                                    {"configMapRef": {"name": "app-config"}},
                                    {"secretRef": {"name": "db"}},
                                ],
                            }
                        ]
                    },
                },
            },
        },
    )
    repo.write(
        f"{app}/secret.yaml",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "api"},
            "type": "Opaque",
            "data": {"key": base64.b64encode(plain_secret.encode()).decode()},
        },
    )
    repo.write(
        "apps/web-production.yaml",
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "web-production", "namespace": "argocd"},
            "spec": {
                "project": "default",
                "source": {
                    "repoURL": "https://git.example.com/platform/gitops.git",
                    "path": app,
                    "plugin": {"name": "driftguard"},
                },
                "destination": {"server": "https://kubernetes.default.svc", "namespace": "shop"},
            },
        },
    )


def test_a_generator_rename_is_one_change_of_its_keys_and_no_removal(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "gitops")
    long_banner = "welcome " * 30
    kustomize_app(
        repo, level="info", password="PLANTED-old-pass", banner="hello", plain_secret="PLANTED-api-1"
    )
    base = repo.commit("base")
    kustomize_app(
        repo, level="debug", password="PLANTED-new-pass", banner=long_banner, plain_secret="PLANTED-api-2"
    )
    head = repo.commit("debug logging, rotated password")

    proc = run_diff(repo.path, base, head, "apps/", "--fail-on-removal", "*production*", "--format", "json")
    assert proc.returncode == 0, proc.stderr  # a rename is not a loss
    assert "PLANTED" not in proc.stdout and "PLANTED" not in proc.stderr
    env = environments(validated(proc.stdout))["web-production"]
    assert env["removed"] == [] and env["added"] == []
    renamed = {r["kind"]: r for r in env["renamed"]}
    cm, secret = renamed["ConfigMap"], renamed["Secret"]
    # kustomize's names: <name>-<10 hash characters>, both sides
    for r in (cm, secret):
        stem = "app-config" if r["kind"] == "ConfigMap" else "db"
        assert r["fromName"].startswith(stem + "-") and r["name"].startswith(stem + "-")
        assert r["fromName"] != r["name"] and len(r["name"]) == len(stem) + 11
    by_path: dict[str, dict[str, Any]] = {f["path"]: f for f in cm["fields"]}
    assert set(by_path) == {"data.LOG_LEVEL", "data.BANNER"}  # the name itself is the rename line
    assert (by_path["data.LOG_LEVEL"]["old"], by_path["data.LOG_LEVEL"]["new"]) == ("info", "debug")
    banner = by_path["data.BANNER"]["new"]
    assert len(banner) == VALUE_CHARS and banner.endswith("…") and banner.startswith("welcome welcome")
    [pw] = secret["fields"]
    assert (
        pw["path"] == "data.password" and pw["old"].startswith("***(sha256:") and pw["new"].startswith("***(")
    )
    assert pw["old"] != pw["new"]  # a reader sees that it changed, not to what
    changed = {c["kind"]: c for c in env["changed"]}
    api = changed["Secret"]["fields"]
    assert [f["path"] for f in api] == ["data.key"] and all(f["new"].startswith("***(") for f in api)
    refs = {f["path"]: f for f in changed["Deployment"]["fields"]}
    assert refs["containers[web].envFrom[0].configMapRef.name"]["new"] == cm["name"]

    text = run_diff(repo.path, base, head, "apps/").stdout
    assert f"  RENAMED  ConfigMap shop/{cm['fromName']} -> {cm['name']}" in text
    assert "           data.LOG_LEVEL: info -> debug" in text
    assert "== web-production (envs/production): 0 removed, 0 added, 2 changed, 2 renamed" in text


def test_a_generated_map_that_goes_is_still_a_removal(tmp_path: Path) -> None:
    """Without a replacement of the same name in the environment, a hash-suffixed map that goes is removed."""
    repo = Repo(tmp_path / "gitops")
    kustomize_app(repo, level="info", password="p", banner="b", plain_secret="s")
    base = repo.commit("base")
    kustomization = repo.path / "envs/production/kustomization.yaml"
    doc = yaml.safe_load(kustomization.read_text())
    doc["configMapGenerator"][0]["name"] = "other-config"
    kustomization.write_text(yaml.safe_dump(doc))
    head = repo.commit("rename the generator")
    proc = run_diff(repo.path, base, head, "apps/", "--fail-on-removal", "*production*", "--format", "json")
    assert proc.returncode == 1
    env = environments(validated(proc.stdout))["web-production"]
    assert [r["name"][: len("app-config-")] for r in env["removed"]] == ["app-config-"]
    assert env["renamed"] == []


def test_a_failed_environment_says_so_and_never_counts(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "gitops")
    kustomize_app(repo, level="info", password="p", banner="b", plain_secret="s")
    repo.write("envs/production/kustomization.yaml", "resources: [missing.yaml]\n")
    base = repo.commit("a broken base")
    head = repo.commit("still broken")
    proc = run_diff(repo.path, base, head, "apps/")
    assert proc.returncode == 0, proc.stderr  # the same error at base: not this PR's doing
    header = next(line for line in proc.stdout.splitlines() if line.startswith("== web-production"))
    assert header == "== web-production (envs/production): RENDER FAILED at base and head, nothing compared"
    assert "0 removed" not in proc.stdout
    md = run_diff(repo.path, base, head, "apps/", "--format", "markdown").stdout
    assert "### web-production (envs/production): RENDER FAILED at base and head, nothing compared" in md
    assert "| `web-production` **(render failed at base and head)** | failed |" in md
    env = environments(validated(run_diff(repo.path, base, head, "apps/", "--format", "json").stdout))
    assert env["web-production"]["failed"] == ["base", "head"] and env["web-production"]["counts"] is None

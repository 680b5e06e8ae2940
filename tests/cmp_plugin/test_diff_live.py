"""``driftguard-cmp diff --live``: the hotfix a merge would erase, named with who made it.

The cluster is the drill's (standins/drill.py): the on-call's ``kubectl patch`` raised the GPU
limit 2 -> 4, the HPA owns ``spec.replicas``. Argo CD is the stand-in (managed-resources), the
person comes from a real notifier (gunicorn) holding the API server's audit Event. The PR under
test bumps the image only; merging it syncs Git's 2 GPUs back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from standins import argo_api, receivers
from standins.apiserver import audit_event
from standins.drill import inference_desired, secret_desired, serve_drill
from standins.processes import stop
from tests.analysis_provider.test_identity_lookup import post_audit, start_notifier
from tests.notifier.conftest import READ_TOKEN
from tests.notifier.test_identity import retime_patch

from .gitrepo import Repo
from .prcheck import environments, run_diff, validated

GPU = 'containers[server].resources.limits["nvidia.com/gpu"]'
APP = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Application",
    "metadata": {"name": "deepseek-inference", "namespace": "argocd"},
    "spec": {
        "project": "default",
        "source": {
            "repoURL": "https://git.example.com/platform/gitops.git",
            "path": "inference",
            "plugin": {"name": "driftguard"},
        },
        "destination": {"server": "https://kubernetes.default.svc", "namespace": "ai-serving"},
        "ignoreDifferences": [{"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]}],
    },
}


def inference_repo(path: Path, *, head_gpu: str = "2") -> tuple[Repo, str, str]:
    """Base renders Git's Deployment; head bumps the image (and sets the GPU limit to ``head_gpu``)."""
    repo = Repo(path)
    repo.write("apps/inference.yaml", APP)
    deployment = inference_desired()
    repo.write("inference/deployment.yaml", deployment)
    base = repo.commit("base")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["image"] = "registry.example.com/ai/deepseek-inference:1.8.3"
    container["resources"]["limits"]["nvidia.com/gpu"] = head_gpu
    repo.write("inference/deployment.yaml", deployment)
    return repo, base, repo.commit("inference 1.8.3")


@pytest.fixture
def argo() -> Iterator[argo_api.FakeArgo]:
    with argo_api.serve() as fake:
        serve_drill(fake)
        yield fake


def live_env(argo: argo_api.FakeArgo, **extra: str) -> dict[str, str]:
    return {"DRIFTGUARD_ARGOCD_URL": argo.url, "DRIFTGUARD_ARGOCD_TOKEN": argo.token, **extra}


def overwrites(doc: dict[str, Any]) -> list[dict[str, Any]]:
    live = environments(doc)["deepseek-inference"]["live"]
    assert live is not None
    return list(live["overwrites"])


def test_the_merge_that_erases_the_hotfix_says_so_and_can_fail(
    tmp_path: Path, argo: argo_api.FakeArgo
) -> None:
    repo, base, head = inference_repo(tmp_path / "gitops")
    proc = run_diff(repo.path, base, head, "apps/", "--live", "--format", "json", **live_env(argo))
    assert proc.returncode == 0, proc.stderr
    doc = validated(proc.stdout)
    assert doc["live"] == {"used": True, "note": ""}
    [o] = overwrites(doc)  # not the HPA's replicas, not the image the PR itself changes
    assert (o["resource"], o["path"], o["live"], o["base"], o["head"]) == (
        "Deployment.apps ai-serving/deepseek-inference",
        GPU,
        "4",
        "2",
        "2",
    )
    assert o["manager"] == "kubectl-patch" and o["time"] == "2026-11-29T14:02:07Z" and o["user"] == ""
    assert ("/api/v1/applications/deepseek-inference/managed-resources", f"Bearer {argo.token}") in [
        (p, auth) for p, auth, _ in argo.requests
    ]
    text = run_diff(repo.path, base, head, "apps/", "--live", **live_env(argo)).stdout
    lines = text.splitlines()
    header = lines.index(
        "== deepseek-inference (inference): 0 removed, 0 added, 1 changed, 1 live change(s) overwritten"
    )
    assert lines[header + 1].startswith(
        f"  OVERWRITE Deployment.apps ai-serving/deepseek-inference {GPU}: live 4 (Git 2) -> 2:"
        " this merge reverts the live change made by kubectl-patch, "
    )  # listed first, before the PR's own change
    assert lines[header + 2] == "  CHANGED  Deployment.apps ai-serving/deepseek-inference"

    blocked = run_diff(
        repo.path, base, head, "apps/", "--live", "--fail-on-overwrite", "deepseek-*", **live_env(argo)
    )
    assert blocked.returncode == 1
    assert (
        "driftguard: refused by diff: deepseek-inference: 1 live change(s) would be overwritten (--fail-on-overwrite)"
        in blocked.stderr
    )
    # Argo CD's glob: `{a,b}` alternatives match, a pattern that names another app does not
    assert (
        run_diff(
            repo.path,
            base,
            head,
            "apps/",
            "--live",
            "--fail-on-overwrite",
            "{x,deepseek}-*",
            **live_env(argo),
        ).returncode
        == 1
    )
    assert (
        run_diff(
            repo.path, base, head, "apps/", "--live", "--fail-on-overwrite", "payment-*", **live_env(argo)
        ).returncode
        == 0
    )


def test_a_head_that_writes_the_hotfix_into_git_keeps_it(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    repo, base, head = inference_repo(tmp_path / "gitops", head_gpu="4")
    proc = run_diff(
        repo.path,
        base,
        head,
        "apps/",
        "--live",
        "--fail-on-overwrite",
        "*",
        "--format",
        "json",
        **live_env(argo),
    )
    assert proc.returncode == 0, proc.stderr
    assert overwrites(validated(proc.stdout)) == []


def test_who_made_the_hotfix_comes_from_the_notifier(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    at = int(time.time()) - 3 * 3600
    stamp = retime_patch(argo, at)
    repo, base, head = inference_repo(tmp_path / "gitops")
    token_file = tmp_path / "read-token"
    token_file.write_text(READ_TOKEN + "\n")
    with receivers.serve() as rx:
        notifier = start_notifier(tmp_path, argo, rx)
        try:
            post_audit(notifier, audit_event(at=at + 0.3))
            env = live_env(
                argo,
                DRIFTGUARD_CMP_NOTIFIER_URL=notifier.url,
                DRIFTGUARD_CMP_NOTIFIER_READ_TOKEN_FILE=str(token_file),
            )
            doc = validated(
                run_diff(repo.path, base, head, "apps/", "--live", "--format", "json", **env).stdout
            )
            md = run_diff(repo.path, base, head, "apps/", "--live", "--format", "markdown", **env).stdout
        finally:
            stop(notifier.proc)
    [o] = overwrites(doc)
    assert o["user"] == "alice@example.com" and o["time"] == stamp
    assert o["who"].startswith("alice@example.com via kubectl-patch, ") and o["who"].endswith("(3 h ago)")
    line = next(x for x in md.splitlines() if x.startswith("- **overwrite**"))
    assert line.startswith(
        f"- **overwrite** `Deployment.apps ai-serving/deepseek-inference` `{GPU}`: live `4` (Git `2`) -> `2`:"
    )
    assert "made by alice\\@example.com via kubectl-patch" in line and line.endswith("(3 h ago)")
    assert "| `deepseek-inference` | 0 | 0 | 1 | 0 | 1 |" in md


def test_without_live_the_report_says_so(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    repo, base, head = inference_repo(tmp_path / "gitops")
    doc = validated(run_diff(repo.path, base, head, "apps/", "--format", "json", **live_env(argo)).stdout)
    assert doc["live"]["used"] is False and "--live was not used" in doc["live"]["note"]
    assert environments(doc)["deepseek-inference"]["live"] is None
    assert not argo.requests  # no --live, no call
    text = run_diff(repo.path, base, head, "apps/").stdout
    assert text.rstrip().endswith(
        "live: --live was not used: live changes in the cluster that this merge would overwrite were not checked"
    )
    md = run_diff(repo.path, base, head, "apps/", "--format", "markdown").stdout
    assert "**live**: --live was not used" in md
    refused = run_diff(repo.path, base, head, "apps/", "--fail-on-overwrite", "*")
    assert refused.returncode == 2 and "--fail-on-overwrite needs --live" in refused.stderr


def test_live_settings_and_failures(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    repo, base, head = inference_repo(tmp_path / "gitops")
    missing = run_diff(repo.path, base, head, "apps/", "--live")
    assert missing.returncode == 2 and "DRIFTGUARD_ARGOCD_URL" in missing.stderr
    token_file = tmp_path / "argocd-token"
    token_file.write_text(argo.token + "\n")
    by_file = run_diff(
        repo.path,
        base,
        head,
        "apps/",
        "--live",
        "--format",
        "json",
        DRIFTGUARD_ARGOCD_URL=argo.url,
        DRIFTGUARD_ARGOCD_TOKEN_FILE=str(token_file),
    )
    assert by_file.returncode == 0, by_file.stderr
    assert len(overwrites(validated(by_file.stdout))) == 1
    both = run_diff(
        repo.path,
        base,
        head,
        "apps/",
        "--live",
        **live_env(argo, DRIFTGUARD_ARGOCD_TOKEN_FILE=str(token_file)),
    )
    assert both.returncode == 2 and "DRIFTGUARD_ARGOCD_TOKEN" in both.stderr and argo.token not in both.stderr
    # Argo CD refusing: the live side cannot be told, which fails a --fail-on-overwrite environment
    argo.fail_with = 403
    denied = run_diff(
        repo.path,
        base,
        head,
        "apps/",
        "--live",
        "--fail-on-overwrite",
        "deepseek-*",
        "--format",
        "json",
        **live_env(argo),
    )
    assert denied.returncode == 1
    live = environments(validated(denied.stdout))["deepseek-inference"]["live"]
    assert live["overwrites"] == [] and "HTTP 403" in live["error"] and argo.token not in denied.stdout
    assert "the live side cannot be read" in denied.stderr
    argo.fail_with = None
    # an Application Argo CD does not know yet: nothing of it runs, nothing to overwrite
    argo.managed.clear()
    absent = run_diff(
        repo.path,
        base,
        head,
        "apps/",
        "--live",
        "--fail-on-overwrite",
        "*",
        "--format",
        "json",
        **live_env(argo),
    )
    assert absent.returncode == 0, absent.stderr
    assert environments(validated(absent.stdout))["deepseek-inference"]["live"]["absent"] is True


def test_an_identity_lookup_that_fails_leaves_the_manager(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    repo, base, head = inference_repo(tmp_path / "gitops")
    env = live_env(argo, DRIFTGUARD_CMP_NOTIFIER_URL=argo.url, DRIFTGUARD_CMP_NOTIFIER_READ_TOKEN=READ_TOKEN)
    proc = run_diff(repo.path, base, head, "apps/", "--live", "--format", "json", **env)
    assert proc.returncode == 0, proc.stderr
    doc = validated(proc.stdout)
    [o] = overwrites(doc)
    assert o["manager"] == "kubectl-patch" and o["user"] == ""
    assert environments(doc)["deepseek-inference"]["live"]["identity"].startswith(
        "the identity lookup failed"
    )
    assert READ_TOKEN not in proc.stdout + proc.stderr
    bad = run_diff(
        repo.path, base, head, "apps/", "--live", **live_env(argo, DRIFTGUARD_CMP_NOTIFIER_URL=argo.url)
    )
    assert bad.returncode == 2 and "DRIFTGUARD_CMP_NOTIFIER_READ_TOKEN" in bad.stderr


def test_a_name_from_the_pr_never_steers_the_api_path(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    """An Application named like another route is not asked about: its live objects are not read."""
    repo, base, _ = inference_repo(tmp_path / "gitops")
    sneaky = {**APP, "metadata": {"name": "other/managed-resources?appNamespace=x#", "namespace": "argocd"}}
    repo.write("apps/inference.yaml", sneaky)
    base = repo.commit("renamed")
    repo.write("inference/extra.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    head = repo.commit("one more map")
    proc = run_diff(repo.path, base, head, "apps/", "--live", "--format", "json", **live_env(argo))
    assert proc.returncode == 0, proc.stderr
    [env] = validated(proc.stdout)["environments"]
    assert "not a Kubernetes object name" in env["live"]["error"]
    assert not [p for p, _, _ in argo.requests if "managed-resources" in p]


def test_a_secret_hotfix_is_named_and_its_values_never_shown(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    """The drill's Secret was edited live (kubectl-edit); the merge re-applies Git's: masked both ways."""
    repo, _, _ = inference_repo(tmp_path / "gitops")
    repo.write("inference/secret.yaml", secret_desired("db-PLANTED-password"))
    base = repo.commit("the Secret in Git")
    repo.write("inference/extra.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    head = repo.commit("one more map")
    proc = run_diff(repo.path, base, head, "apps/", "--live", "--format", "json", **live_env(argo))
    assert proc.returncode == 0, proc.stderr
    assert "PLANTED" not in proc.stdout and "PLANTED" not in proc.stderr
    found = {(o["kind"], o["path"]): o for o in overwrites(validated(proc.stdout))}
    secret = found[("Secret", "data.password")]
    assert secret["manager"] == "kubectl-edit"
    assert all(secret[k].startswith("***(sha256:") for k in ("live", "base", "head"))
    assert secret["live"] != secret["base"] == secret["head"]

"""The incident, reproduced with real helm and git: a chart default flips and production loses its Deployment.

Staging sets `enabled: true` itself; production relies on the chart default. The PR flips the
default to false. The every-environment diff must show the production removal with the key as its
cause; generate for production must refuse under implicit-defaults=refuse; and the shrink guard
must refuse against a baseline (read from a kube-apiserver stand-in) that holds the Deployment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from driftguard.cause import CHART_DEFAULT, REFUSED, Cause, GatingKey, parse_condition
from standins.argo_api import FakeArgo, application, kubeconfig, serve
from tests.helpers import git, run_cmp

from .conftest import cmp_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gitops"


def as_argocd_condition(stderr: str) -> str:
    """The ComparisonError message Argo CD v3.5 makes of a failed generate: cmpserver/plugin/plugin.go
    (``CmdError``: the command, ``failed exit status N``, the trimmed stderr), wrapped by
    reposerver/repository/repository.go and controller/state.go."""
    return (
        "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown"
        " desc = error generating manifests in cmp: rpc error: code = Unknown desc = error generating"
        " manifests: `driftguard-cmp generate` failed exit status 3: " + stderr.strip()
    )


@pytest.fixture
def gitops(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository with base = chart default true, head = chart default false."""
    repo = tmp_path / "gitops"
    for part in ("charts", "clusters", "apps"):
        shutil.copytree(EXAMPLE / part, repo / part)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    values = repo / "charts/payment/values.yaml"
    values.write_text(values.read_text().replace("enabled: true\nreplicas", "enabled: false\nreplicas"))
    git(repo, "commit", "-q", "-am", "chart: disable by default")
    head = git(repo, "rev-parse", "HEAD")
    return repo, base, head


def diff(repo: Path, base: str, head: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_HELM": os.environ["DRIFTGUARD_HELM"],
        "DRIFTGUARD_KUSTOMIZE": os.environ["DRIFTGUARD_KUSTOMIZE"],
        "HOME": str(repo.parent),
    }
    return run_cmp(repo, env, "diff", "--base", base, "--head", head, *extra)


def test_diff_reports_the_production_removal_with_its_cause(gitops: tuple[Path, str, str]) -> None:
    repo, base, head = gitops
    proc = diff(repo, base, head, "apps/", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    envs = {e["name"]: e for e in report["environments"]}
    prod, staging = envs["payment-production"], envs["payment-staging"]
    assert [r["resource"] for r in prod["removed"]] == [
        "Deployment.apps payment-production/payment-production"
    ]
    cause = prod["removed"][0]["cause"]
    assert cause == (
        "the chart default of `enabled` changed from true to false and this environment does not set it "
        "(templates/deployment.yaml:1: {{ if .Values.enabled }})"
    )
    assert staging["removed"] == [] and staging["changed"] == []
    assert report["environments"][0]["name"] == "payment-production"  # destructive first
    assert git(repo, "status", "--porcelain") == ""  # the user's checkout is untouched
    assert (
        "worktree" not in git(repo, "worktree", "list").split("\n")[-1]
        or len(git(repo, "worktree", "list").splitlines()) == 1
    )


def test_fail_on_removal_blocks_only_matching_environments(gitops: tuple[Path, str, str]) -> None:
    repo, base, head = gitops
    blocked = diff(repo, base, head, "apps/*.yaml", "--fail-on-removal", "*-production")
    assert blocked.returncode == 1
    assert (
        "REMOVED  Deployment.apps payment-production/payment-production <- the chart default of `enabled`"
        in blocked.stdout
    )
    assert blocked.stdout.index("== payment-production") < blocked.stdout.index("== payment-staging")
    assert "refused by diff" in blocked.stderr
    assert diff(repo, base, head, "apps/", "--fail-on-removal", "*-staging").returncode == 0


def test_markdown_for_a_pr_comment(gitops: tuple[Path, str, str]) -> None:
    repo, base, head = gitops
    out = diff(
        repo, base, head, "apps/payment-production.yaml", "apps/payment-staging.yaml", "--format", "markdown"
    ).stdout
    assert out.startswith("## driftguard: rendered diff")
    assert "| `payment-production` | 1 | 0 | 0 |" in out
    assert "- **removed** `Deployment.apps payment-production/payment-production`" in out


def test_bare_app_path_and_bad_revision(gitops: tuple[Path, str, str]) -> None:
    repo, base, head = gitops
    proc = diff(repo, base, head, "charts/payment", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    [env] = json.loads(proc.stdout)["environments"]
    assert env["name"] == "charts/payment" and len(env["removed"]) == 1  # no values file: the default decides
    bad = diff(repo, "no-such-rev", head, "apps/")
    assert bad.returncode == 2 and bad.stderr.startswith("driftguard: error: git rev-parse")


def production_env(repo: Path, mode: str, **extra: str) -> dict[str, str]:
    params = [
        {"name": "values-files", "array": ["../../clusters/production/payment-values.yaml"]},
        {"name": "implicit-defaults", "string": mode},
    ]
    env = cmp_env(
        "charts/payment",
        params,
        ARGOCD_APP_NAME="payment-production",
        ARGOCD_APP_NAMESPACE="payment-production",
        **extra,
    )
    env["DRIFTGUARD_CMP_CACHE_DIR"] = str(repo.parent / "cache")
    return env


def test_generate_refuses_the_implicit_default_in_refuse_mode(gitops: tuple[Path, str, str]) -> None:
    """Before the flip, production inherits `enabled: true`: refuse mode refuses, naming template:line."""
    repo, base, _ = gitops
    git(repo, "checkout", "-q", base)
    proc = run_cmp(repo / "charts/payment", production_env(repo, "refuse"), "generate")
    assert proc.returncode == 3 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[0] == (
        "driftguard: refused by implicit-defaults: 1 resource switch(es) rely on chart defaults "
        "this environment does not set (refuse mode)"
    )
    assert lines[1] == (
        "  enabled: templates/deployment.yaml:1 {{ if .Values.enabled }} decides "
        "Deployment payment-production; not set here, chart default true; "
        "proven: a render with it set to false removes 1"
    )
    assert not any("service.enabled" in line for line in lines)  # production sets that one
    # the line the notifier quotes as the cause of the prune set (driftguard/cause.py), before the fix
    assert lines[-2:] == [
        "driftguard: gating key `enabled` relies on the chart default (templates/deployment.yaml:1)",
        "fix: set each key in this environment's values file (even to the chart's current default) to pin it",
    ]
    cause = parse_condition(as_argocd_condition(proc.stderr))
    assert cause == Cause(
        REFUSED,
        "1 resource switch(es) rely on chart defaults this environment does not set (refuse mode)",
        "implicit-defaults",
        (GatingKey("enabled", CHART_DEFAULT, "templates/deployment.yaml:1"),),
    )
    # staging sets it: the same chart renders there
    staging = production_env(repo, "refuse")
    staging["ARGOCD_APP_PARAMETERS"] = json.dumps(
        [
            {"name": "values-files", "array": ["../../clusters/staging/payment-values.yaml"]},
            {"name": "implicit-defaults", "string": "refuse"},
        ]
    )
    assert run_cmp(repo / "charts/payment", staging, "generate").returncode == 0
    # after the flip the default is false and nothing of it renders: implicit-defaults has nothing to
    # pin, and the shrink guard refuses the removal against the last render it remembers
    git(repo, "checkout", "-q", "main")
    after = run_cmp(repo / "charts/payment", production_env(repo, "refuse"), "generate")
    assert after.returncode == 3 and after.stderr.startswith("driftguard: refused by shrink:")
    assert "hidden by the chart default of enabled (templates/deployment.yaml:1)" in after.stderr
    assert (
        "driftguard: gating key `enabled` relies on the chart default (templates/deployment.yaml:1)"
        in after.stderr.splitlines()
    )
    cause = parse_condition(as_argocd_condition(after.stderr))
    assert cause is not None and (cause.kind, cause.guard) == (REFUSED, "shrink")
    assert cause.reason.startswith("the render would prune 1 of ")
    assert cause.keys == (GatingKey("enabled", CHART_DEFAULT, "templates/deployment.yaml:1"),)


def test_warn_mode_prints_one_line_and_explicit_keys_refuse(gitops: tuple[Path, str, str]) -> None:
    repo, base, _ = gitops
    git(repo, "checkout", "-q", base)
    proc = run_cmp(repo / "charts/payment", production_env(repo, "warn"), "generate")
    assert proc.returncode == 0
    notes = [line for line in proc.stderr.splitlines() if "chart default" in line]
    assert notes == [
        "driftguard: note: 1 resource switches rely on chart defaults: enabled (Deployment payment-production); "
        "set them in this environment's values to pin them "
        "(driftguard-cmp render --explain lists each with template:line)"
    ]
    env = production_env(repo, "warn")
    params = [*json.loads(env["ARGOCD_APP_PARAMETERS"]), {"name": "explicit-keys", "array": ["enabled"]}]
    env["ARGOCD_APP_PARAMETERS"] = json.dumps(params)
    proc = run_cmp(repo / "charts/payment", env, "generate")
    assert proc.returncode == 3 and "(listed in explicit-keys)" in proc.stderr.splitlines()[0]
    assert "templates/deployment.yaml:1" in proc.stderr.splitlines()[1]


def test_render_explain_lists_findings_and_the_rest(gitops: tuple[Path, str, str]) -> None:
    repo, base, _ = gitops
    git(repo, "checkout", "-q", base)
    env = {k: v for k, v in production_env(repo, "warn").items() if not k.startswith("ARGOCD_")}
    proc = run_cmp(
        repo,
        env,
        "render",
        "charts/payment",
        "--values-file",
        "../../clusters/production/payment-values.yaml",
        "--explain",
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    i = out.index("implicit-defaults: 1 resource switch(es) rely on chart defaults (each proven by a render)")
    assert out[i + 1].startswith(
        "  enabled: templates/deployment.yaml:1 {{ if .Values.enabled }} decides Deployment"
    )
    assert out[i + 2] == "not findings:"
    assert out[i + 3] == (
        "  service.enabled: templates/service.yaml:1 {{ if .Values.service.enabled }}: set by this environment"
    )


def test_shrink_refuses_against_the_cluster_baseline_and_honours_an_exact_approval(
    gitops: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, _, head = gitops
    fake = FakeArgo()
    held = [
        ("apps", "Deployment", "payment-production", "payment-production"),
        ("", "Service", "payment-production", "payment-production"),
    ]
    fake.put(application("payment-production", resources=held, dest_namespace="payment-production"))
    with serve(fake):
        cfg = tmp_path / "kubeconfig"
        cfg.write_text(kubeconfig(fake.url, fake.token))
        env = production_env(repo, "warn", DRIFTGUARD_KUBECONFIG=str(cfg), ARGOCD_APP_REVISION=head)
        proc = run_cmp(repo / "charts/payment", env, "generate")
        assert proc.returncode == 3, proc.stderr
        lines = proc.stderr.splitlines()
        assert (
            lines[0]
            == "driftguard: refused by shrink: the render would prune 1 of 2 resources the Application manages (50% of 2 > max-prune-ratio 20%)"
        )
        assert (
            "Deployment.apps payment-production/payment-production  <- hidden by the chart default of enabled (templates/deployment.yaml:1)"
            in lines[1]
        )
        assert "baseline: the cluster (Application status)" in proc.stderr
        assert (
            lines[-1]
            == f"fix: if this is intended, annotate the Application: driftguard.io/approve-prune={head} (approves exactly this revision)"
        )
        assert (
            fake.requests[0][0]
            == "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/payment-production"
        )

        fake.put(
            application(
                "payment-production",
                resources=held,
                dest_namespace="payment-production",
                annotations={"driftguard.io/approve-prune": "0" * 40},
            )
        )
        stale = run_cmp(repo / "charts/payment", env, "generate")
        assert (
            stale.returncode == 3
            and "approval on the Application is for revision 000000000000" in stale.stderr
        )

        fake.put(
            application(
                "payment-production",
                resources=held,
                dest_namespace="payment-production",
                annotations={"driftguard.io/approve-prune": head},
            )
        )
        approved = run_cmp(repo / "charts/payment", env, "generate")
        assert approved.returncode == 0, approved.stderr
        assert "removals approved for revision" in approved.stderr
        assert "kind: Service" in approved.stdout and "kind: Deployment" not in approved.stdout

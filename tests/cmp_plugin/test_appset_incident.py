"""The seed chain end to end, with real git and helm: an ApplicationSet over clusters/*/payment/*,
a PR that flips the chart default production relies on and commits stale helm-rendered/ output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .gitrepo import Repo, payment_repo

STALE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: payment-production
  namespace: payment-production
spec:
  replicas: 6
  selector: {matchLabels: {app: payment}}
  template:
    metadata: {labels: {app: payment}}
    spec: {containers: [{name: payment, image: registry.example.com/shop/payment:2.30.0}]}
"""


@pytest.fixture
def incident(tmp_path: Path) -> tuple[Repo, str, str]:
    repo = payment_repo(tmp_path / "gitops")
    base = repo.commit("base")
    values = repo.path / "charts/payment/values.yaml"
    values.write_text(values.read_text().replace("enabled: true\nreplicas", "enabled: false\nreplicas"))
    repo.write("clusters/production/payment/helm-rendered/deployment.yaml", STALE)
    head = repo.commit("chart: disable by default (and a rebase that lost .gitignore)")
    return repo, base, head


def test_the_diff_names_the_production_removal_its_cause_and_the_stray_application(
    incident: tuple[Repo, str, str],
) -> None:
    repo, base, head = incident
    proc = repo.diff(base, head, "apps/", "--fail-on-removal", "*production*")
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert (
        "REMOVED  Deployment.apps payment-production/payment-production <- the chart default of "
        "`payment.enabled` changed from true to false and this environment does not set it"
    ) in out
    stray = (
        "ApplicationSet payment spec.generators[0] (git) would create Application helm-rendered-production "
        "from clusters/production/payment/helm-rendered, which looks like committed render output"
    )
    assert out.splitlines()[0].startswith("STRAY: " + stray)  # findings come first
    assert (
        "== helm-rendered-production (clusters/production/payment/helm-rendered): 0 removed, 1 added" in out
    )
    assert (
        "driftguard: refused by diff: destructive changes in payment-production (--fail-on-removal)"
        in proc.stderr
    )
    assert "driftguard: refused by appset-stray: " + stray in proc.stderr
    assert len(repo.worktrees()) == 1 and repo.git("status", "--porcelain") == ""


def test_json_says_which_applicationset_made_each_environment(incident: tuple[Repo, str, str]) -> None:
    repo, base, head = incident
    proc = repo.diff(base, head, "apps/payment.yaml", "--format", "json")
    assert proc.returncode == 1  # the stray Application alone blocks
    report = json.loads(proc.stdout)
    envs = {e["name"]: e for e in report["environments"]}
    assert set(envs) == {"payment-production", "payment-staging", "helm-rendered-production"}
    assert envs["payment-staging"]["removed"] == [] and envs["payment-staging"]["status"] == "kept"
    assert envs["helm-rendered-production"]["status"] == "created"
    assert envs["payment-production"]["origin"] == "git directory clusters/production/payment/payment"
    assert envs["payment-production"]["applicationSet"] == "payment"
    assert [f["kind"] for f in report["findings"]] == ["stray"]
    assert report["environments"][0]["name"] == "payment-production"  # destructive first


def test_without_the_stray_the_production_glob_alone_decides(incident: tuple[Repo, str, str]) -> None:
    repo, base, _ = incident
    repo.remove("clusters/production/payment/helm-rendered")
    head = repo.commit("drop the stray output")
    assert repo.diff(base, head, "apps/", "--fail-on-removal", "*staging*").returncode == 0
    assert repo.diff(base, head, "apps/", "--fail-on-removal", "*production*").returncode == 1

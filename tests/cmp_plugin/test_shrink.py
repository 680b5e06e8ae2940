"""The shrink guard against each baseline source, its limits, and its failure modes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from standins.argo_api import FakeArgo, application, kubeconfig, serve

from .conftest import Generate

# what tests/cmp_plugin/repo/plain renders (destination namespace "apps")
PLAIN = [
    ("", "Namespace", "", "plain"),
    ("", "ConfigMap", "plain", "flow"),
    ("", "Secret", "plain", "flow-secret"),
    ("", "ConfigMap", "plain", "from-json"),
]


def extra(n: int, kind: str = "ConfigMap") -> list[tuple[str, str, str, str]]:
    return [("", kind, "plain", f"gone-{i}") for i in range(n)]


@pytest.fixture
def cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    with serve(FakeArgo()) as fake:
        cfg = tmp_path / "kubeconfig"
        cfg.write_text(kubeconfig(fake.url, fake.token))
        fake.kubeconfig = str(cfg)  # type: ignore[attr-defined]
        yield fake


def run(generate: Generate, fake: FakeArgo, **extra_env: str):  # type: ignore[no-untyped-def]
    return generate("plain", ARGOCD_APP_NAME="plain", DRIFTGUARD_KUBECONFIG=fake.kubeconfig, **extra_env)  # type: ignore[attr-defined]


def test_within_limits_passes_with_a_note(generate: Generate, cluster: FakeArgo) -> None:
    cluster.put(application("plain", resources=PLAIN + extra(1)))
    proc = run(generate, cluster)
    assert proc.returncode == 0, proc.stderr
    assert "drops 1 of 5 resources (within limits)" in proc.stderr


def test_protected_kind_is_refused_even_alone(generate: Generate, cluster: FakeArgo) -> None:
    resources = (
        PLAIN
        + [("", "PersistentVolumeClaim", "plain", "data")]
        + [("", "ConfigMap", "plain", f"keep-{i}") for i in range(0)]
    )
    cluster.put(application("plain", resources=resources))
    proc = run(
        generate, cluster, ARGOCD_APP_PARAMETERS=json.dumps([{"name": "max-prune-ratio", "string": "0.9"}])
    )
    assert proc.returncode == 3
    assert "1 of a protected kind (PersistentVolumeClaim)" in proc.stderr.splitlines()[0]
    assert "  PersistentVolumeClaim plain/data" in proc.stderr.splitlines()


def test_count_limit_and_the_list_is_cut_at_twenty(generate: Generate, cluster: FakeArgo) -> None:
    cluster.put(application("plain", resources=PLAIN + extra(25)))
    proc = run(generate, cluster)
    assert proc.returncode == 3
    head = proc.stderr.splitlines()[0]
    assert "prune 25 of 29" in head and "25 > max-prune-count 10" in head and "> max-prune-ratio 20%" in head
    assert "  ... and 5 more" in proc.stderr.splitlines()
    assert len(proc.stderr.splitlines()) <= 32


def test_limits_are_parameters(generate: Generate, cluster: FakeArgo) -> None:
    cluster.put(application("plain", resources=PLAIN + extra(25)))
    params = [{"name": "max-prune-count", "string": "30"}, {"name": "max-prune-ratio", "string": "1"}]
    assert run(generate, cluster, ARGOCD_APP_PARAMETERS=json.dumps(params)).returncode == 0


def test_apps_in_other_namespaces_and_pruning_items(generate: Generate, cluster: FakeArgo) -> None:
    app = application("plain", namespace="team-a", resources=PLAIN + extra(3))
    for item in app["status"]["resources"][-3:]:
        item["requiresPruning"] = True  # already outside Git: not part of the baseline
    cluster.put(app)
    proc = generate("plain", ARGOCD_APP_NAME="team-a_plain", DRIFTGUARD_KUBECONFIG=cluster.kubeconfig)  # type: ignore[attr-defined]
    assert proc.returncode == 0, proc.stderr
    assert cluster.requests[-1][0].endswith("/namespaces/team-a/applications/plain")


def test_argo_cd_api_is_the_second_source(generate: Generate, cluster: FakeArgo) -> None:
    cluster.put(application("plain", resources=PLAIN + extra(10)))
    proc = generate(
        "plain",
        ARGOCD_APP_NAME="plain",
        DRIFTGUARD_ARGOCD_URL=cluster.url,
        DRIFTGUARD_ARGOCD_TOKEN=cluster.token,
    )
    assert proc.returncode == 3 and "baseline: the Argo CD API" in proc.stderr
    path, auth, query = cluster.requests[-1]
    assert (
        path == "/api/v1/applications/plain"
        and query == {"appNamespace": "argocd"}
        and auth == f"Bearer {cluster.token}"
    )


def test_unreachable_cluster_falls_back_and_says_why(generate: Generate, tmp_path: Path) -> None:
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(kubeconfig("http://127.0.0.1:9", "secret-token-value"))
    proc = generate(
        "plain", ARGOCD_APP_NAME="plain", DRIFTGUARD_KUBECONFIG=str(cfg), DRIFTGUARD_CMP_BASELINE_TIMEOUT="2"
    )
    assert proc.returncode == 0
    assert "shrink guard skipped: could not read Application argocd/plain from the cluster" in proc.stderr
    assert "secret-token-value" not in proc.stderr


def test_no_baseline_warns_or_fails_closed(generate: Generate) -> None:
    proc = generate("plain", ARGOCD_APP_NAME="fresh")
    assert proc.returncode == 0 and "shrink guard skipped: no baseline source answered" in proc.stderr
    closed = generate("plain", ARGOCD_APP_NAME="fresh2", DRIFTGUARD_CMP_BASELINE_REQUIRED="true")
    assert closed.returncode == 3 and closed.stderr.startswith("driftguard: refused by shrink: no baseline")


def test_last_good_render_is_the_baseline_of_last_resort(generate: Generate, repo: Path) -> None:
    assert generate("plain", ARGOCD_APP_NAME="cached").returncode == 0
    for name in ("namespace.yaml", "nested/app.yml"):
        (repo / "plain" / name).unlink()
    proc = generate("plain", ARGOCD_APP_NAME="cached")
    assert proc.returncode == 3
    assert (
        "prune 3 of 4" in proc.stderr.splitlines()[0]
        and "protected kind (Namespace)" in proc.stderr.splitlines()[0]
    )
    assert "baseline: the last render that passed (revision 0123456789ab)" in proc.stderr

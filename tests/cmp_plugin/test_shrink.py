"""The shrink guard against each baseline source, its limits, and its failure modes."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import trustme

from standins.argo_api import FakeArgo, application, kubeconfig, serve

from .conftest import Generate, cmp_env

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
    for name in ("namespace.yaml", "app.yml"):
        (repo / "plain" / name).unlink()
    proc = generate("plain", ARGOCD_APP_NAME="cached")
    assert proc.returncode == 3
    assert (
        "prune 3 of 4" in proc.stderr.splitlines()[0]
        and "protected kind (Namespace)" in proc.stderr.splitlines()[0]
    )
    assert "baseline: the last render that passed (revision 0123456789ab)" in proc.stderr


# --- in the pod: the projected token and the cluster CA, over real TLS --------------------------


def tls_server(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    return ctx


@pytest.fixture
def pod(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A TLS kube-apiserver stand-in, and the sidecar's service-account mount pointing at it."""
    ca = trustme.CA()
    with serve(FakeArgo(token="projected-token-0123456789"), tls=tls_server(ca)) as fake:
        sa = tmp_path / "serviceaccount"
        sa.mkdir()
        (sa / "token").write_text(fake.token + "\n")
        ca.cert_pem.write_to_path(str(sa / "ca.crt"))
        fake.env = {  # type: ignore[attr-defined]
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": fake.url.rsplit(":", 1)[1],
            "DRIFTGUARD_CMP_SERVICE_ACCOUNT_DIR": str(sa),
        }
        fake.sa = sa  # type: ignore[attr-defined]
        yield fake


def test_in_the_pod_the_application_is_read_with_the_projected_token(
    generate: Generate, pod: FakeArgo
) -> None:
    pod.put(application("plain", namespace="team-a", resources=PLAIN + extra(10)))
    proc = generate("plain", ARGOCD_APP_NAME="team-a_plain", **pod.env)  # type: ignore[attr-defined]
    assert proc.returncode == 3, proc.stderr
    assert "baseline: the cluster (Application status)" in proc.stderr
    path, auth, _ = pod.requests[-1]
    assert path == "/apis/argoproj.io/v1alpha1/namespaces/team-a/applications/plain"
    assert auth == f"Bearer {pod.token}"


def test_in_the_pod_an_untrusted_certificate_is_refused_and_the_token_stays_secret(
    generate: Generate, pod: FakeArgo
) -> None:
    trustme.CA().cert_pem.write_to_path(str(pod.sa / "ca.crt"))  # type: ignore[attr-defined]
    pod.put(application("plain", resources=PLAIN + extra(10)))
    proc = generate("plain", ARGOCD_APP_NAME="plain", **pod.env)  # type: ignore[attr-defined]
    assert proc.returncode == 0, proc.stderr  # no baseline: warn and pass (the default)
    assert "could not read Application argocd/plain from the cluster" in proc.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in proc.stderr
    assert pod.token not in proc.stderr and pod.requests == []


def test_in_the_pod_a_hanging_api_server_costs_the_timeout_not_the_render(
    generate: Generate, pod: FakeArgo
) -> None:
    # the stand-in answers after 5 s: "timed out" with a passing render is the 1 s baseline deadline
    pod.delay = 5.0
    proc = generate("plain", ARGOCD_APP_NAME="plain", DRIFTGUARD_CMP_BASELINE_TIMEOUT="1", **pod.env)  # type: ignore[attr-defined]
    assert proc.returncode == 0 and "timed out" in proc.stderr, proc.stderr


PROBE = """
import sys
import cmp_plugin.cli
code = cmp_plugin.cli.main(["generate"])
sys.stdout.flush()
print("\\n@@", code, " ".join(sorted(sys.modules)), sep="\\n@@")
"""


def test_in_the_pod_no_kubernetes_client_is_imported(repo: Path, pod: FakeArgo) -> None:
    """The kubernetes client costs ~240 ms to import; the render's read is one stdlib HTTPS GET."""
    pod.put(application("plain", resources=PLAIN))
    # a cache of its own: the default ($TMPDIR/driftguard) is shared with every other run on the
    # machine, whose baselines, plans and cached renders this run would read and leave its own in
    cache = {"DRIFTGUARD_CMP_CACHE_DIR": str(repo.parent / "probe-cache")}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=repo / "plain",
        env={**cmp_env("plain", ARGOCD_APP_NAME="plain"), **pod.env, **cache},  # type: ignore[attr-defined]
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    _, code, modules = proc.stdout.rsplit("\n@@", 2)
    assert code.strip() == "0" and "baseline" not in proc.stderr, proc.stderr
    assert pod.requests, "the probe did not read the Application"
    assert not {"kubernetes", "requests", "urllib3"} & set(modules.split())


def test_argo_cd_api_over_tls_with_its_ca_file(generate: Generate, tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "argocd-ca.crt"))
    with serve(FakeArgo(), tls=tls_server(ca)) as fake:
        fake.put(application("plain", resources=PLAIN + extra(10)))
        env = {"DRIFTGUARD_ARGOCD_URL": fake.url, "DRIFTGUARD_ARGOCD_TOKEN": fake.token}
        refused = generate(
            "plain", ARGOCD_APP_NAME="plain", DRIFTGUARD_ARGOCD_CA_FILE=str(tmp_path / "argocd-ca.crt"), **env
        )
        assert refused.returncode == 3 and "baseline: the Argo CD API" in refused.stderr
        unverified = generate("plain", ARGOCD_APP_NAME="other", **env)
        assert unverified.returncode == 0
        assert "could not read Application argocd/other from the Argo CD API" in unverified.stderr
        assert fake.token not in unverified.stderr

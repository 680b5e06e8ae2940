"""driftguard-notifier as the Deployment runs it: settings checked once, then gunicorn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import requests

from standins.argo_api import FakeArgo
from standins.processes import free_port, start_cli, stop
from tests.helpers import wait_until

from .conftest import TOKEN, service_env

CLI = str(Path(sys.executable).parent / "driftguard-notifier")


def env_for(tmp_path: Path, argo: FakeArgo, **extra: str) -> dict[str, str]:
    return service_env(
        tmp_path, argo, {"slack": {"type": "slack", "url": "https://hooks.example.com/x"}}, **extra
    )


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_check_config_says_what_it_found(tmp_path: Path, argo: FakeArgo) -> None:
    proc = run(env_for(tmp_path, argo), "--check-config")
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout.strip() == "driftguard-notifier: config ok: channels slack; 1 route(s)"
    )  # the default route


@pytest.mark.slow  # one gunicorn start per wrong setting
def test_bad_settings_are_one_line_before_any_gunicorn(tmp_path: Path, argo: FakeArgo) -> None:
    for extra, setting in (
        ({"DRIFTGUARD_NOTIFIER_TOKEN": ""}, "DRIFTGUARD_NOTIFIER_TOKEN"),
        ({"DRIFTGUARD_ARGOCD_URL": ""}, "DRIFTGUARD_ARGOCD_URL"),
        (
            {"DRIFTGUARD_NOTIFIER_OUTBOX": str(tmp_path / "notifier.yaml" / "outbox.sqlite3")},
            "DRIFTGUARD_NOTIFIER_OUTBOX",
        ),
    ):
        for args in ((), ("--check-config",)):
            proc = run(env_for(tmp_path, argo, **extra), *args)
            assert proc.returncode == 2, (extra, args, proc.stderr)
            assert proc.stderr.startswith(f"driftguard-notifier: error: {setting}: "), proc.stderr
            assert "Traceback" not in proc.stderr and "gunicorn" not in proc.stderr.lower()


def test_it_starts_gunicorn_that_answers(tmp_path: Path, argo: FakeArgo) -> None:
    port = free_port()
    with (tmp_path / "log").open("wb") as log:
        proc = subprocess.Popen(
            [CLI, "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            env=env_for(tmp_path, argo),
            stdout=log,
            stderr=log,
            start_new_session=True,
        )

    def up_or_exited() -> bool:
        if proc.poll() is not None:
            return True
        try:
            return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
        except (requests.ConnectionError, requests.Timeout):  # a worker still booting
            return False

    try:
        wait_until(up_or_exited, "/healthz to answer, or the CLI to exit")
        if proc.poll() is not None:  # it exited
            pytest.fail((tmp_path / "log").read_text())
    finally:
        stop(proc)


@pytest.mark.slow  # multi-worker gunicorn
def test_metrics_add_up_over_every_gunicorn_worker(tmp_path: Path, argo: FakeArgo) -> None:
    """prometheus-client's multiprocess mode under the CLI's gunicorn: both workers' counts in one scrape."""
    port = free_port()
    prom = tmp_path / "prom"
    prom.mkdir()
    env = env_for(tmp_path, argo, DRIFTGUARD_NOTIFIER_WORKER="false", PROMETHEUS_MULTIPROC_DIR=str(prom))
    # /healthz answers first: a post sent while no worker has booted waits in the listen backlog,
    # and one the client gave up on (its 5 s timeout, on a loaded machine) is still served and
    # counted by the worker once it boots, but not by ``sent`` below
    proc = start_cli("driftguard-notifier", port, env, tmp_path / "log", workers=2)
    try:
        url = f"http://127.0.0.1:{port}"
        sent = 0

        def both_workers_counted() -> bool:
            """One more refused post; true once both workers have counted some (each writes its
            own counter_<pid>.db) and ten were answered."""
            nonlocal sent
            try:
                resp = requests.post(
                    f"{url}/v1/notifications", data="{}", headers={"Authorization": "Bearer nope"}, timeout=5
                )
            except (requests.ConnectionError, requests.Timeout):
                return False
            assert resp.status_code == 401 and resp.json() == {"error": "missing or wrong bearer token"}
            sent += 1
            return len(list(prom.glob("counter_*.db"))) >= 2 and sent >= 10

        wait_until(both_workers_counted, "both workers to count", interval=0.02)
        assert len(list(prom.glob("counter_*.db"))) == 2
        text = requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5).text
        assert f'driftguard_notifier_received_total{{outcome="unauthorized"}} {float(sent)}' in text
        assert 'driftguard_notifier_failures_total{stage="send"} 0.0' in text
        assert 'driftguard_notifier_queue_depth{queue="notifications"} 0.0' in text
    finally:
        stop(proc)
    assert "Traceback" not in (tmp_path / "log").read_text()

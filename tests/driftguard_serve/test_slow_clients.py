"""Slow clients cannot starve a service (issue 31), against the real services under real gunicorn.

The attack: 12 connections sending one header byte every 5 s made the notifier stop answering
``/healthz`` (20 did it to the analysis provider): each held a gthread thread while its head
trickled in. Here 50 such connections stay open while ``/healthz`` is asked, with a generous
client timeout: the check is that it answers at all, not how fast (timing lives in bench/).
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from standins import argo_api
from standins.processes import free_port, start_cli, stop

pytestmark = pytest.mark.slow  # 50 slow clients against real gunicorn

KEY = "redact-key-for-tests-0123456789abcdef"
TOKEN = "slow-client-test-token-0123456789"
SLOW = 50


def _env(tmp_path: Path, argo: argo_api.FakeArgo, service: str, **extra: str) -> dict[str, str]:
    import os

    env = {
        "PATH": os.environ["PATH"],
        "TMPDIR": str(tmp_path),
        "DRIFTGUARD_REDACT_KEY": KEY,
        "DRIFTGUARD_ARGOCD_URL": argo.url,
        "DRIFTGUARD_ARGOCD_TOKEN": argo.token,
        **extra,
    }
    if service == "driftguard-notifier":
        config = tmp_path / "notifier.yaml"
        config.write_text(
            json.dumps({"channels": {"slack": {"type": "slack", "url": "https://hooks.example.com/x"}}})
        )
        env |= {
            "DRIFTGUARD_NOTIFIER_TOKEN": TOKEN,
            "DRIFTGUARD_NOTIFIER_CONFIG": str(config),
            "DRIFTGUARD_NOTIFIER_OUTBOX": str(tmp_path / "outbox.sqlite3"),
            "DRIFTGUARD_NOTIFIER_WORKER": "false",
        }
    else:
        env["DRIFTGUARD_ANALYSIS_TOKEN"] = TOKEN
    return env


@pytest.fixture
def argo() -> Iterator[argo_api.FakeArgo]:
    with argo_api.serve() as fake:
        yield fake


def _slow(port: int, n: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """``n`` connections that each sent the first bytes of a request head and then stall."""
    conns = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        conns.append(s)
    return conns


def _healthz(port: int, source: str = "127.0.0.1") -> int:
    """The status of one /healthz over a fresh connection from ``source``; 0 when none came within 10 s."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            head = s.recv(64)
    except OSError:
        return 0
    return int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else 0


def _start(
    tmp_path: Path, service: str, argo: argo_api.FakeArgo, **extra: str
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = start_cli(
        service, port, _env(tmp_path, argo, service, **extra), tmp_path / "service.log", workers=2, threads=4
    )
    return proc, port


@pytest.mark.parametrize("service", ["driftguard-notifier", "driftguard-analysis"])
def test_healthz_answers_while_50_slow_connections_are_open(
    tmp_path: Path, argo: argo_api.FakeArgo, service: str
) -> None:
    proc, port = _start(tmp_path, service, argo)
    slow: list[socket.socket] = []
    try:
        slow = _slow(port, SLOW)
        for s in slow[:: SLOW // 5]:  # keep trickling: a byte now and then, as the attack did
            s.sendall(b"a")
        answers = [_healthz(port) for _ in range(5)]
        assert answers == [200] * 5, answers
        # and the slow ones were never answered as if whole
        slow[0].settimeout(0.2)
        with pytest.raises(TimeoutError):
            slow[0].recv(1)
    finally:
        for s in slow:
            s.close()
        stop(proc)


def test_a_request_not_whole_by_the_deadline_is_408(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    proc, port = _start(tmp_path, "driftguard-analysis", argo, DRIFTGUARD_HTTP_READ_TIMEOUT="1")
    try:
        [s] = _slow(port, 1)
        s.settimeout(15)
        head = s.recv(64)  # the worker's loop looks at deadlines every second: within a few
        assert head.startswith(b"HTTP/1.1 408"), head
        # a body promised and never sent is the same
        with socket.create_connection(("127.0.0.1", port), timeout=15) as b:
            b.sendall(b"POST /v1/gates/drift HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            assert b.recv(64).startswith(b"HTTP/1.1 408")
        with socket.create_connection(("127.0.0.1", port), timeout=15) as c:
            c.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            assert c.recv(64).startswith(b"HTTP/1.1 411")
    finally:
        stop(proc)


def test_one_client_holds_a_bounded_number_of_connections(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    proc, port = _start(tmp_path, "driftguard-notifier", argo, DRIFTGUARD_HTTP_MAX_CONNECTIONS_PER_CLIENT="3")
    slow: list[socket.socket] = []
    try:
        # two workers, three each: the seventh and later connections from 127.0.0.2 are refused
        slow = _slow(port, 8, source="127.0.0.2")
        refused = 0
        for s in slow:
            s.settimeout(2)
            try:
                if s.recv(64).startswith(b"HTTP/1.1 503"):
                    refused += 1
            except TimeoutError:
                pass
        assert refused >= 2, refused
        assert _healthz(port, source="127.0.0.1") == 200  # another client is served
    finally:
        for s in slow:
            s.close()
        stop(proc)


def test_keep_alive_requests_still_work(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    proc, port = _start(tmp_path, "driftguard-notifier", argo)
    try:
        with requests.Session() as session:
            for _ in range(5):
                assert session.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
            # under gunicorn's 64 KiB drain cap for a body the app does not read (over it, gunicorn
            # closes the connection after the answer, as plain gthread does)
            body = json.dumps({"app": {"metadata": {"name": "x"}}, "padding": "y" * 50_000})
            resp = session.post(
                f"http://127.0.0.1:{port}/v1/notifications",
                data=body,
                headers={"Authorization": "Bearer wrong-token-0123456789abcdef"},
                timeout=10,
            )
            assert resp.status_code == 401
            assert session.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    finally:
        stop(proc)


def test_the_tls_listener_answers_while_50_handshakes_stall(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    """The admission listener: a connection that never finishes its TLS handshake holds no thread."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    env = _env(
        tmp_path,
        argo,
        "driftguard-notifier",
        DRIFTGUARD_NOTIFIER_TLS_CERT=str(tmp_path / "tls.crt"),
        DRIFTGUARD_NOTIFIER_TLS_KEY=str(tmp_path / "tls.key"),
    )
    port = free_port()
    proc = start_cli(
        "driftguard-notifier",
        port,
        env,
        tmp_path / "service.log",
        workers=1,
        threads=8,
        ca=str(tmp_path / "ca.crt"),
    )
    stalled: list[socket.socket] = []
    try:
        for n in range(SLOW):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if n % 2:
                s.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
            stalled.append(s)
        for _ in range(3):
            resp = requests.get(
                f"https://127.0.0.1:{port}/healthz", verify=str(tmp_path / "ca.crt"), timeout=10
            )
            assert resp.status_code == 200
    finally:
        for s in stalled:
            s.close()
        stop(proc)


def test_unfinished_bodies_are_bounded_in_memory(tmp_path: Path, argo: argo_api.FakeArgo) -> None:
    """Bodies that never finish cannot take the pod's memory: past 64 MiB per worker, 503."""
    port = free_port()
    proc = start_cli(
        "driftguard-analysis",
        port,
        _env(tmp_path, argo, "driftguard-analysis"),
        tmp_path / "s.log",
        workers=1,
    )
    conns: list[socket.socket] = []
    try:
        chunk = b"x" * (7 * 1024 * 1024)
        refused = 0
        for n in range(12):  # 12 x 7 MiB, each 1 MiB short of its announced 8,000,000 bytes
            s = socket.create_connection(
                ("127.0.0.1", port), timeout=10, source_address=(f"127.0.1.{n + 1}", 0)
            )
            conns.append(s)
            try:
                s.sendall(
                    b"POST /v1/gates/drift HTTP/1.1\r\nHost: x\r\nContent-Length: 8000000\r\n\r\n" + chunk
                )
            except OSError:
                refused += 1  # closed under us while sending: the refusal
        for s in conns:
            s.settimeout(3)
            try:
                if s.recv(64).startswith(b"HTTP/1.1 503"):
                    refused += 1
            except OSError:
                pass
        assert refused >= 2, refused
        assert _healthz(port) == 200
    finally:
        for s in conns:
            s.close()
        stop(proc)

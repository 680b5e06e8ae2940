"""The guarded worker's request rule, and that every install runs it."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from driftguard.service import WORKER_CLASS
from driftguard_serve.worker import MAX_HEAD, request_state
from tests.helpers import examples

ROOT = Path(__file__).resolve().parents[2]


def test_the_image_and_both_services_run_it() -> None:
    assert WORKER_CLASS == "driftguard_serve.worker.GuardedWorker"
    assert re.search(r"^COPY driftguard_serve driftguard_serve$", (ROOT / "Dockerfile").read_text(), re.M)


HEAD = b"POST /v1/notifications HTTP/1.1\r\nHost: x\r\n"


@settings(max_examples=examples(300), deadline=None)
@given(
    body=st.binary(max_size=300), cut=st.integers(min_value=0, max_value=400), extra=st.binary(max_size=20)
)
def test_a_request_is_whole_exactly_when_its_head_and_announced_body_are_in(
    body: bytes, cut: int, extra: bytes
) -> None:
    # reference: RFC 9112 section 6.3: with Content-Length, the body is that many octets after the
    # blank line that ends the head; what follows belongs to the next request
    whole = HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    part = whole[: min(cut, len(whole))]
    expected = -1 if len(part) == len(whole) else 0
    assert request_state(part, max_body=1000) == expected
    assert request_state(whole + extra, max_body=1000) == -1


def test_refusals() -> None:
    assert request_state(HEAD + b"Transfer-Encoding: chunked\r\n\r\n", max_body=10) == 411
    assert request_state(HEAD + b"Content-Length: 11\r\n\r\n", max_body=10) == 413
    assert request_state(HEAD + b"Content-Length: -1\r\n\r\n", max_body=10) == 400
    assert request_state(HEAD + b"Content-Length: 1e3\r\n\r\n", max_body=10) == 400
    assert request_state(HEAD + b"X: " + b"a" * MAX_HEAD, max_body=10) == 431
    assert request_state(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", max_body=10) == -1
    assert request_state(HEAD + b"Content-Length: 1\r\nContent-Length: 100\r\n\r\n", max_body=1000) == 400

"""One GET (or read-only POST) against an upstream API with one total deadline, and strict JSON out of its answer.

requests' ``timeout`` bounds each socket read, not the answer: an upstream that trickles a byte a
second restarts it with every byte and holds the caller for as long as it likes. ``get`` streams
the body and gives each read only the time left before ``deadline`` (``time.monotonic()``), so the
whole answer, headers to last byte, is bounded. ``strict_json`` refuses what Python's ``json``
accepts but JSON does not (``NaN``, ``Infinity``), so an upstream cannot smuggle them to us.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from driftguard.errors import UpstreamTimeout, UpstreamUnavailable

if TYPE_CHECKING:
    import requests

__all__ = ["MAX_BODY", "Answer", "get", "post", "strict_json"]

MAX_BODY = 256 * 1024 * 1024
"""Bytes of one answer we hold in memory at most (a managed-resources answer of thousands of resources is tens of MB)."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str
    retry_after: str = ""


def get(
    session: requests.Session,
    url: str,
    *,
    who: str,
    deadline: float,
    params: dict[str, str] | None = None,
    verify: bool | str = True,
    max_body: int = MAX_BODY,
) -> Answer:
    """GET ``url`` and read its whole answer before ``deadline``; ``who`` names the upstream in errors.

    UpstreamTimeout when the deadline passes (connecting, waiting or reading), UpstreamUnavailable
    ("unreachable") when the connection fails or is cut, or when the answer is over ``max_body`` bytes.
    """
    return _call(
        session, "GET", url, who=who, deadline=deadline, params=params, verify=verify, max_body=max_body
    )


def post(
    session: requests.Session,
    url: str,
    *,
    who: str,
    deadline: float,
    body: Any,
    verify: bool | str = True,
    max_body: int = MAX_BODY,
) -> Answer:
    """POST ``body`` as JSON to a read API that takes its question in the body; otherwise as :func:`get`."""
    return _call(
        session, "POST", url, who=who, deadline=deadline, json_body=body, verify=verify, max_body=max_body
    )


def _call(
    session: requests.Session,
    method: str,
    url: str,
    *,
    who: str,
    deadline: float,
    params: dict[str, str] | None = None,
    json_body: Any = None,
    verify: bool | str,
    max_body: int,
) -> Answer:
    import requests
    import urllib3

    budget = deadline - time.monotonic()
    if budget <= 0:
        raise UpstreamTimeout(f"{who}: no time left to ask")
    try:
        resp = session.request(
            method,
            url,
            params=params,
            json=json_body,
            timeout=(budget, budget),
            stream=True,
            verify=verify,
        )
    except requests.Timeout as exc:
        raise UpstreamTimeout(f"{who} did not answer within {budget:.1f} s") from exc
    except requests.RequestException as exc:
        raise UpstreamUnavailable(f"{who} is unreachable ({type(exc).__name__})") from exc
    try:
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise UpstreamTimeout(
                    f"{who} was still sending its answer at the deadline ({size} bytes read)"
                )
            _limit_next_read(resp, left)
            chunk = resp.raw.read1(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > max_body:
                limit = f"{max_body // 2**20} MiB" if max_body >= 2**20 else f"{max_body // 1024} KiB"
                raise UpstreamUnavailable(f"{who} answered more than {limit}")
            chunks.append(chunk)
    except (urllib3.exceptions.ReadTimeoutError, TimeoutError) as exc:
        raise UpstreamTimeout(f"{who} was still sending its answer at the deadline") from exc
    except (urllib3.exceptions.HTTPError, requests.RequestException, OSError) as exc:
        raise UpstreamUnavailable(
            f"{who} is unreachable: the answer was cut off ({type(exc).__name__})"
        ) from exc
    finally:
        resp.close()
    return Answer(
        resp.status_code,
        b"".join(chunks),
        resp.headers.get("Content-Type", ""),
        resp.headers.get("Retry-After", ""),
    )


def _limit_next_read(resp: requests.Response, seconds: float) -> None:
    """Give the next socket read only the time left (urllib3's ``connection`` is the http.client one)."""
    conn = getattr(resp.raw, "connection", None)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        sock.settimeout(max(seconds, 0.001))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_json(body: bytes) -> Any:
    """The JSON value of ``body``; ValueError for anything that is not strict JSON (NaN, Infinity, bad UTF-8)."""
    return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)

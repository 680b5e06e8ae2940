"""A Prometheus instant query over its HTTP API, with one deadline and an answer checked before use.

What a gate may read (prometheus docs/querying/api.md, "Expression query result formats"): the
envelope ``{"status": "success", "data": {"resultType": ..., "result": ...}}``; a ``scalar`` is
``[<unix time>, "<value>"]`` and a ``vector`` sample carries ``"value": [<unix time>, "<value>"]``,
the value always a JSON *string* (Go's float formatting: "NaN", "+Inf", "-Inf" included). Anything
else (a matrix, a number or boolean instead of the string, an infinity, non-strict JSON) is refused.

Errors never carry what Prometheus said (issue 31): its error text, a sample or a series count could
be the answer to a question a caller had no right to ask. They say what was wrong, not the value.
"""

from __future__ import annotations

import math
import time
from typing import Any

from driftguard import upstream
from driftguard.errors import UpstreamUnavailable

__all__ = ["Prometheus"]

# prometheus web/api/v1/api.go errorType values: words of Prometheus' own, never a caller's data
_ERROR_TYPES = frozenset(
    {"timeout", "canceled", "execution", "bad_data", "internal", "unavailable", "not_found", "not_acceptable"}
)


class Prometheus:
    def __init__(self, url: str, *, timeout: float, token: str = "") -> None:
        import requests

        self.url = url.rstrip("/")
        self.timeout = timeout
        self._session = requests.Session()
        self._session.headers["Accept"] = "application/json"
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"

    def instant(self, query: str, *, deadline: float | None = None) -> float | None:
        """The single finite value (or NaN) of an instant query; None when there is no data.

        UpstreamUnavailable for every answer that is not a well-formed single sample.
        """
        until = time.monotonic() + self.timeout
        if deadline is not None:
            until = min(until, deadline)
        resp = upstream.get(
            self._session,
            f"{self.url}/api/v1/query",
            who="Prometheus",
            deadline=until,
            params={"query": query},
        )
        try:
            body: Any = upstream.strict_json(resp.body)
        except ValueError as exc:
            kind = resp.content_type.split(";")[0] or "no content type"
            raise UpstreamUnavailable(
                f"Prometheus answered HTTP {resp.status} with something that is not JSON ({kind})"
            ) from exc
        if resp.status != 200 or not isinstance(body, dict) or body.get("status") != "success":
            error_type = body.get("errorType") if isinstance(body, dict) else None
            known = error_type if error_type in _ERROR_TYPES else "an error"
            raise UpstreamUnavailable(f"Prometheus answered HTTP {resp.status} ({known}); see its log")
        data = body.get("data")
        if not isinstance(data, dict):
            raise UpstreamUnavailable("Prometheus answered a success without a data object")
        result_type, result = data.get("resultType"), data.get("result")
        if result_type == "scalar":
            return _value(result)
        if result_type != "vector":
            raise UpstreamUnavailable(
                "the query returned neither a scalar nor a vector; a gate needs a scalar or a one-sample vector"
            )
        if not isinstance(result, list):
            raise UpstreamUnavailable("Prometheus answered a vector whose result is not a list")
        if not result:
            return None
        if len(result) > 1:
            raise UpstreamUnavailable(
                "the query returned more than one series; a gate needs exactly one (aggregate it with sum())"
            )
        sample = result[0]
        if not isinstance(sample, dict):
            raise UpstreamUnavailable("Prometheus answered a vector sample that is not an object")
        return _value(sample.get("value"))


def _value(pair: Any) -> float:
    """``[<time>, "<value>"]`` -> the value: finite or NaN; infinities and non-strings are refused."""
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        raise UpstreamUnavailable('Prometheus answered a sample that is not [<time>, "<value as a string>"]')
    try:
        value = float(pair[1])
    except ValueError as exc:
        raise UpstreamUnavailable("Prometheus answered a sample value that is not a number") from exc
    if math.isinf(value):
        raise UpstreamUnavailable("Prometheus answered an infinite value: no success rate")
    return value

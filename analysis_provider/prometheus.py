"""A Prometheus instant query over its HTTP API, with a timeout and clear failures."""

from __future__ import annotations

import math
from typing import Any

from driftguard.errors import UpstreamTimeout, UpstreamUnavailable

__all__ = ["Prometheus"]


class Prometheus:
    def __init__(self, url: str, *, timeout: float, token: str = "") -> None:
        import requests

        self.url = url.rstrip("/")
        self.timeout = timeout
        self._session = requests.Session()
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"

    def instant(self, query: str) -> float | None:
        """The single value of an instant query; None when there is no data or it is NaN."""
        import requests

        try:
            resp = self._session.get(
                f"{self.url}/api/v1/query", params={"query": query}, timeout=self.timeout
            )
        except requests.Timeout as exc:
            raise UpstreamTimeout(f"Prometheus did not answer within {self.timeout:g} s") from exc
        except requests.RequestException as exc:
            raise UpstreamUnavailable(f"Prometheus is unreachable ({type(exc).__name__})") from exc
        try:
            body: Any = resp.json()
        except ValueError as exc:
            raise UpstreamUnavailable(
                f"Prometheus answered HTTP {resp.status_code} with something that is not JSON"
            ) from exc
        if resp.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error", "") if isinstance(body, dict) else ""
            raise UpstreamUnavailable(f"Prometheus answered HTTP {resp.status_code}: {str(error)[:200]}")
        data = body.get("data") or {}
        kind, result = data.get("resultType"), data.get("result")
        if not isinstance(result, list):
            raise UpstreamUnavailable("Prometheus answered a malformed result")
        try:
            if kind == "scalar":
                value = float(result[1])
            elif kind == "vector":
                if not result:
                    return None
                if len(result) > 1:
                    raise UpstreamUnavailable(
                        f"the query returned {len(result)} series; a gate needs exactly one (aggregate it with sum())"
                    )
                value = float(result[0]["value"][1])
            else:
                raise UpstreamUnavailable(
                    f"the query returned a {kind}; a gate needs a scalar or a one-sample vector"
                )
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            raise UpstreamUnavailable("Prometheus answered a malformed result") from exc
        return None if math.isnan(value) else value

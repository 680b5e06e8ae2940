"""success-rate: a Prometheus instant query against a threshold; no data or NaN is inconclusive."""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

from analysis_provider.gates.base import FAIL, INCONCLUSIVE, PASS, Arg, GateContext, Verdict
from driftguard.errors import InputError, UpstreamUnavailable

__all__ = ["DEFAULT_QUERY", "SuccessRateGate"]

# the success rate of the incident's AnalysisTemplate: non-5xx over all requests of a service
DEFAULT_QUERY = (
    'sum(rate(http_requests_total{{service="{service}",code!~"5.."}}[{window}]))'
    ' / sum(rate(http_requests_total{{service="{service}"}}[{window}]))'
)


def _query(value: str) -> str:
    if len(value) > 2000:
        raise InputError("query is longer than 2,000 characters")
    return value


def _service(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,253}", value):
        raise InputError(f"service {value!r} may hold letters, digits and _ . : - only")
    return value


def _threshold(value: str) -> float:
    try:
        number = float(value)
    except ValueError as exc:
        raise InputError(f"threshold {value!r} is not a number") from exc
    if not 0 <= number <= 1:
        raise InputError(f"threshold {value} must be between 0 and 1")
    return number


def _window(value: str) -> str:
    if not re.fullmatch(r"[1-9][0-9]{0,3}[smhd]", value):
        raise InputError(f"window {value!r} must look like 30s, 5m, 1h")
    return value


class SuccessRateGate:
    name = "success-rate"
    args: ClassVar[dict[str, Arg]] = {
        "query": Arg(
            _query,
            schema={"type": "string", "maxLength": 2000},
            description="A PromQL instant query returning one sample in [0, 1] (or give service=)",
        ),
        "service": Arg(
            _service,
            schema={"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,253}$"},
            description="The service label of http_requests_total for the default query (or give query=)",
        ),
        "threshold": Arg(
            _threshold,
            default="0.99",
            schema={"type": "string", "pattern": r"^(0(\.[0-9]+)?|1(\.0+)?)$", "default": "0.99"},
            description="The lowest success rate that passes, 0 to 1",
        ),
        "window": Arg(
            _window,
            default="5m",
            schema={"type": "string", "pattern": "^[1-9][0-9]{0,3}[smhd]$", "default": "5m"},
            description="The rate() window of the default query",
        ),
    }

    def evaluate(self, args: dict[str, Any], ctx: GateContext) -> Verdict:
        if bool(args.get("query")) == bool(args.get("service")):
            raise InputError("give exactly one of query= or service=")
        if ctx.prometheus is None:
            raise InputError("the success-rate gate needs DRIFTGUARD_PROMETHEUS_URL on the analysis provider")
        query = args["query"] or DEFAULT_QUERY.format(service=args["service"], window=args["window"])
        threshold = float(args["threshold"])
        value = ctx.instant(query)
        if value is None or math.isnan(value):
            # observed values that are not finite are strings: the answer stays strict JSON
            observed = {"value": None if value is None else "NaN", "threshold": threshold, "query": query}
            return Verdict(
                self.name,
                INCONCLUSIVE,
                ["no data for the query (or NaN): not enough traffic to judge"],
                observed,
            )
        if not 0 <= value <= 1:
            raise UpstreamUnavailable(
                f"Prometheus answered {value:g} for the success-rate query: a success rate lies between 0 and 1"
            )
        observed = {"value": value, "threshold": threshold, "query": query}
        if value < threshold:
            return Verdict(self.name, FAIL, [f"success rate {value:.4f} is below {threshold}"], observed)
        return Verdict(self.name, PASS, [f"success rate {value:.4f} meets {threshold}"], observed)

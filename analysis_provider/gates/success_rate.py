"""success-rate: a Prometheus query the platform wrote, against a threshold; no data or NaN is inconclusive.

Never a free query (issue 31: a tenant's token sent ``count(kube_secret_info{namespace="payments"})``
and read the value back). The caller names a template (``template=``, default ``success-rate``,
the built-in below) and passes its arguments; the platform's templates live in
``DRIFTGUARD_PROMETHEUS_QUERIES`` (analysis_provider/queries.py). Arguments are checked against
their patterns before they are put in: none can hold a quote, a brace or a space.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

from analysis_provider.gates.base import FAIL, INCONCLUSIVE, PASS, Arg, GateContext, Verdict
from analysis_provider.queries import DEFAULT_TEMPLATE
from driftguard.errors import InputError, UpstreamUnavailable

__all__ = ["SuccessRateGate"]


def _template(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", value):
        raise InputError(f"template {value[:70]!r} is not a template name (lower-case letters, digits, -)")
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
    summary = "A platform query template against a threshold; no data or NaN is inconclusive."
    all_when = ("template", "service")
    """``all`` runs it only when one of these is given: without them there is no query to run."""
    args: ClassVar[dict[str, Arg]] = {
        "template": Arg(
            _template,
            default="",
            schema={"type": "string", "pattern": "^$|^[a-z0-9][a-z0-9-]{0,62}$"},
            description="The platform's query template (DRIFTGUARD_PROMETHEUS_QUERIES; default success-rate)",
        ),
        "service": Arg(
            _service,
            schema={"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,253}$"},
            description="The template's $service (the built-in: the service label of http_requests_total)",
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
            description="The template's $window (the rate() window)",
        ),
    }

    all_args = args

    def evaluate(self, args: dict[str, Any], ctx: GateContext) -> Verdict:
        if ctx.prometheus is None:
            raise InputError("the success-rate gate needs DRIFTGUARD_PROMETHEUS_URL on the analysis provider")
        name = args.get("template") or DEFAULT_TEMPLATE
        template = ctx.queries.get(name)
        if template is None:
            raise InputError(
                f"unknown template {name!r}; the platform's templates: {', '.join(sorted(ctx.queries))}"
            )
        query = template.fill({"service": args.get("service") or "", "window": args["window"]})
        threshold = float(args["threshold"])
        value = ctx.instant(query)
        if value is None or math.isnan(value):
            # observed values that are not finite are strings: the answer stays strict JSON
            observed = {"value": None if value is None else "NaN", "threshold": threshold, "template": name}
            return Verdict(
                self.name,
                INCONCLUSIVE,
                ["no data for the query (or NaN): not enough traffic to judge"],
                observed,
            )
        if not 0 <= value <= 1:
            raise UpstreamUnavailable(
                "Prometheus answered a value outside 0..1 for the success-rate query: no success rate"
            )
        observed = {"value": value, "threshold": threshold, "template": name}
        if value < threshold:
            return Verdict(self.name, FAIL, [f"success rate {value:.4f} is below {threshold}"], observed)
        return Verdict(self.name, PASS, [f"success rate {value:.4f} meets {threshold}"], observed)

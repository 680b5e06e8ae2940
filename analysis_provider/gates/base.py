"""What every gate shares: its arguments, its verdict, and the context it reads from."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from driftguard.argocd import ArgoCDClient
from driftguard.errors import InputError, UpstreamUnavailable
from driftguard.ignore import IgnoreRule, JqRunner
from driftguard.redact import Redactor
from driftguard.windows import SyncWindow

__all__ = [
    "APP_ARGS",
    "FAIL",
    "INCONCLUSIVE",
    "PASS",
    "Arg",
    "Gate",
    "GateContext",
    "Verdict",
    "a_string",
    "an_object",
    "parse_args",
]

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Verdict:
    gate: str
    verdict: str
    reasons: list[str] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)

    def to_json(self, checked_at: str) -> dict[str, Any]:
        return {
            "ok": self.verdict == PASS,
            "verdict": self.verdict,
            "gate": self.gate,
            "reasons": self.reasons,
            "observed": self.observed,
            "checkedAt": checked_at,
        }


@dataclass(frozen=True)
class Arg:
    """One query argument: its check, whether it is required, its default."""

    check: Callable[[str], Any]
    required: bool = False
    default: str | None = None
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "string"})
    """Its JSON schema in /openapi.json (what ``check`` accepts, as near as a schema can say)."""
    description: str = ""


def app_name(value: str) -> str:
    if not _NAME.match(value):
        raise InputError(
            f"app {value!r} is not a valid Application name (did the AnalysisTemplate substitute {{{{args.app}}}}?)"
        )
    return value


def namespace(value: str) -> str:
    if value and not _NAMESPACE.match(value):
        raise InputError(f"appNamespace {value!r} is not a valid namespace")
    return value


APP_ARGS: dict[str, Arg] = {
    "app": Arg(
        app_name,
        required=True,
        schema={"type": "string", "pattern": _NAME.pattern, "maxLength": 253},
        description="The Application's name",
    ),
    "appNamespace": Arg(
        namespace,
        default="",
        schema={"type": "string", "pattern": f"^$|{_NAMESPACE.pattern}", "maxLength": 63},
        description="The Application's namespace (default: Argo CD's own)",
    ),
}


def parse_args(spec: Mapping[str, Arg], raw: Mapping[str, str]) -> dict[str, Any]:
    """Typed arguments; unknown, missing or malformed ones raise InputError naming them."""
    unknown = sorted(set(raw) - set(spec))
    if unknown:
        raise InputError(
            f"unknown argument(s) {', '.join(unknown)}; this gate takes {', '.join(sorted(spec))}"
        )
    out: dict[str, Any] = {}
    for name, arg in spec.items():
        value = raw.get(name)
        if value is None or value == "":
            if arg.required:
                raise InputError(f"argument {name} is required")
            value = arg.default
        out[name] = arg.check(value) if value not in (None, "") else value
    return out


@dataclass
class GateContext:
    """The data sources and rules a gate may read."""

    argocd: ArgoCDClient
    prometheus: Any
    windows: list[SyncWindow]
    system_rules: list[IgnoreRule]
    redactor: Redactor
    jq: JqRunner
    now: Callable[[], datetime]
    cached: Callable[[tuple[Any, ...], Callable[[], Any]], Any]
    """Coalescing look-ups shared by the gates (an Application read once serves drift, sync and freeze)."""
    deadline: float | None = None
    """``time.monotonic()`` by which this request must be answered: every upstream read stops there."""
    identities: Any = None
    """The notifier's identity lookup (analysis_provider/identities.py ``NotifierIdentities``), when configured."""
    queries: Mapping[str, Any] = field(default_factory=dict)
    """The Prometheus query templates by name (analysis_provider/queries.py ``QueryTemplate``)."""

    def application(self, name: str, app_namespace: str) -> dict[str, Any]:
        return self.cached(  # type: ignore[no-any-return]
            ("app", name, app_namespace),
            lambda: self.argocd.application(name, app_namespace, deadline=self.deadline),
        )

    def managed_resources(self, name: str, app_namespace: str) -> list[Any]:
        return self.cached(  # type: ignore[no-any-return]
            ("managed", name, app_namespace),
            lambda: self.argocd.managed_resources(name, app_namespace, deadline=self.deadline),
        )

    def project(self, name: str) -> dict[str, Any]:
        return self.cached(  # type: ignore[no-any-return]
            ("project", name), lambda: self.argocd.project(name, deadline=self.deadline)
        )

    def instant(self, query: str) -> float | None:
        return self.cached(  # type: ignore[no-any-return]
            ("prom", query), lambda: self.prometheus.instant(query, deadline=self.deadline)
        )


def an_object(value: Any, where: str) -> dict[str, Any]:
    """``value`` when it is an object or absent (``{}``); else the upstream answered a shape no gate can read."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UpstreamUnavailable(f"Argo CD answered {where} that is not an object")
    return value


def a_string(value: Any, where: str) -> str:
    """``value`` when it is a string or absent (``""``); else UpstreamUnavailable naming ``where``."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UpstreamUnavailable(f"Argo CD answered {where} that is not a string")
    return value


class Gate(Protocol):
    """One gate: a module in this package and a line in ``gates/__init__.py``'s ``GATES``."""

    @property
    def name(self) -> str:
        """Its name in the URL (``/v1/gates/<name>``), in metrics and in ``observed`` of ``all``."""
        ...

    @property
    def summary(self) -> str:
        """What it decides, one sentence: its operation's summary in ``/openapi.json``."""
        ...

    @property
    def args(self) -> Mapping[str, Arg]:
        """The query arguments it takes."""
        ...

    @property
    def all_args(self) -> Mapping[str, Arg]:
        """The arguments it takes inside ``all`` (``all`` accepts the union over every gate)."""
        ...

    @property
    def all_when(self) -> tuple[str, ...]:
        """Empty: ``all`` always runs it; else ``all`` runs it only when one of these arguments is given."""
        ...

    def evaluate(self, args: dict[str, Any], ctx: GateContext) -> Verdict:
        """A decided verdict; NotFound for a missing Application; UpstreamUnavailable when undecidable."""
        ...

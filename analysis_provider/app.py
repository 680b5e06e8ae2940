"""``create_app()``: Argo Rollouts web metric gates, for ``gunicorn 'analysis_provider.app:create_app()'``.

Every decided verdict is HTTP 200 with JSON (``jsonPath: "{$.ok}"`` and ``successCondition:
result == true`` read it). Non-2xx only when the gate could not decide: 400 bad arguments, 401,
404 unknown gate, 502/503/504 when Argo CD or Prometheus failed; Rollouts counts those as an
Error, never as a pass. An Application that does not exist is a decided ``fail``.

One deadline per request: ``DRIFTGUARD_ANALYSIS_TIMEOUT`` seconds from arrival bound the whole
answer. Gates run in a worker pool while the request thread waits for them until the deadline, so
an upstream that holds a connection open cannot hold the answer; ``all`` runs its sub-gates at
once under the same deadline; every upstream read is given only the time left. Answers are strict
JSON (a value that is not finite is written as a string, ``"NaN"``, ``"+Inf"``, ``"-Inf"``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request
from flask.json.provider import DefaultJSONProvider
from prometheus_client import Counter
from werkzeug.exceptions import HTTPException

from analysis_provider import openapi
from analysis_provider.cache import Coalescing
from analysis_provider.callers import Caller
from analysis_provider.gates import ALL_ARGS, FAIL, GATES, INCONCLUSIVE, PASS, GateContext, Verdict, in_all
from analysis_provider.gates.base import parse_args
from analysis_provider.identities import NotifierIdentities
from analysis_provider.prometheus import Prometheus
from analysis_provider.settings import AnalysisSettings
from driftguard.argocd import ArgoCDClient
from driftguard.argocd_cm import system_rules_from_file
from driftguard.errors import (
    ConfigError,
    InputError,
    NotFound,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from driftguard.ignore import JqRunner
from driftguard.manifests import safe_load
from driftguard.metrics import bounded, exposition
from driftguard.redact import Redactor
from driftguard.windows import SyncWindow

__all__ = ["create_app"]

bp = Blueprint("gates", __name__)

GATE_NAMES = (*GATES, "all")
OUTCOMES = (PASS, FAIL, INCONCLUSIVE, "400", "401", "403", "404", "500", "502", "503", "504")
MARGIN = 0.25
"""Seconds before the request's deadline at which upstream reads stop, so a gate whose upstream is
too slow ends with an error naming it while the request thread still waits for it."""

REQUESTS = Counter(
    "driftguard_analysis_requests",
    "Gate requests by gate (unknown for a name that is no gate) and outcome (verdict or HTTP status).",
    ["gate", "outcome"],
)
EVALUATIONS = Counter(
    "driftguard_analysis_evaluations", "Gate evaluations that were not served from the cache."
)


def _count(gate: str, outcome: str) -> None:
    # label values only from known sets: request input never becomes a series (driftguard.metrics)
    REQUESTS.labels(bounded(gate, GATE_NAMES), bounded(outcome, OUTCOMES, other="other")).inc()


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _error(status: int, message: str, gate: str) -> tuple[Response, int]:
    _count(gate, str(status))
    shown = gate if gate in GATE_NAMES else "unknown"
    return jsonify({"error": message, "gate": shown, "checkedAt": _now_iso()}), status


@bp.get("/v1/gates/<gate>")
def gate(gate: str) -> tuple[Response, int]:
    state = current_app.extensions["driftguard"]
    settings: AnalysisSettings = state["settings"]
    deadline = time.monotonic() + settings.timeout
    caller = None
    if settings.auth == "token":
        caller = settings.callers.find(request.headers.get("Authorization", ""))
        if caller is None:
            return _error(401, "missing or wrong bearer token", gate)
    raw = {k: v for k, v in request.args.items()}
    ctx = replace(state["ctx"], deadline=deadline - min(MARGIN, settings.timeout / 4))
    try:
        if gate == "all":
            args = parse_args(ALL_ARGS, raw)
            if not _allowed(caller, args, ctx):
                return _forbidden(caller, args, gate)
            verdict = _all(args, state, ctx, deadline)
        elif gate in GATES:
            g = GATES[gate]
            args = parse_args(g.args, raw)
            if "app" in g.args and not _allowed(caller, args, ctx):
                return _forbidden(caller, args, gate)
            verdict = _wait(_submit(g.name, args, state, ctx), deadline, g.name)
        else:
            return _error(404, f"unknown gate {gate[:60]!r}; gates: {', '.join(GATE_NAMES)}", gate)
    except InputError as exc:
        return _error(400, str(exc), gate)
    except UpstreamTimeout as exc:
        return _error(504, str(exc), gate)
    except UpstreamUnavailable as exc:
        status = 503 if "unreachable" in str(exc) else 502
        return _error(status, str(exc), gate)
    except UpstreamError as exc:
        return _error(502, str(exc), gate)
    _count(gate, verdict.verdict)
    return jsonify(verdict.to_json(_now_iso())), 200


def _allowed(caller: Caller | None, args: dict[str, Any], ctx: GateContext) -> bool:
    """Whether the caller's entry covers the Application (its spec.project and name); None: auth is off.

    The Application is read as the gates read it (cached, so the gate's own read is this one). One
    that does not exist is allowed only to a caller of every project: to anyone else a missing name
    and a name in another project look the same (403).
    """
    if caller is None:
        return True
    try:
        app = ctx.application(args["app"], args["appNamespace"])
    except NotFound:
        return caller.every_project
    spec = app.get("spec") if isinstance(app, dict) else None
    project = (spec.get("project") if isinstance(spec, dict) else None) or "default"  # Argo CD's default
    return isinstance(project, str) and caller.allows(project=project, app=args["app"])


def _forbidden(caller: Caller | None, args: dict[str, Any], gate: str) -> tuple[Response, int]:
    name = caller.name if caller else ""
    return _error(
        403,
        f"caller {name!r} may not ask about Application {args['app']!r}: it is outside the projects and"
        " apps of its entry in DRIFTGUARD_ANALYSIS_CALLERS",
        gate,
    )


def _submit(name: str, args: dict[str, Any], state: dict[str, Any], ctx: GateContext) -> Future[Verdict]:
    """Start one gate in the pool: its verdict (cached per arguments) or its error, in a Future."""
    key = (name, tuple(sorted((k, str(v)) for k, v in args.items())))

    def run() -> Verdict:
        EVALUATIONS.inc()
        try:
            return GATES[name].evaluate(args, ctx)
        except NotFound as exc:
            if str(exc).startswith("AppProject"):  # a project that is gone: nothing of the app may sync
                return Verdict(name, FAIL, [str(exc)], {})
            where = f"{args.get('appNamespace') or 'default namespace'}"
            return Verdict(name, FAIL, [f"application not found: {args.get('app')} ({where})"], {})

    pool: ThreadPoolExecutor = state["pool"]
    return pool.submit(state["cache"].get, key, run)


def _wait(future: Future[Verdict], deadline: float, name: str) -> Verdict:
    try:
        return future.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout as exc:
        raise UpstreamTimeout(
            f"{name}: Argo CD or Prometheus did not answer within DRIFTGUARD_ANALYSIS_TIMEOUT"
        ) from exc


def _all(args: dict[str, Any], state: dict[str, Any], ctx: GateContext, deadline: float) -> Verdict:
    """Every gate at once, under the request's one deadline: any fail fails; then any error is an error."""
    futures = {name: _submit(name, own, state, ctx) for name, own in in_all(args)}
    verdicts: list[Verdict] = []
    errors: list[UpstreamError] = []
    for name, future in futures.items():  # all run at once, so waiting in turn costs one deadline
        try:
            verdicts.append(_wait(future, deadline, name))
        except UpstreamError as exc:
            errors.append(exc)
    failed = [v for v in verdicts if v.verdict == FAIL]
    observed = {v.gate: v.verdict for v in verdicts}
    if failed:
        return Verdict("all", FAIL, [f"{v.gate}: {r}" for v in failed for r in v.reasons], observed)
    if errors:
        raise errors[0]  # nothing failed, but a gate could not decide: neither pass nor fail
    inconclusive = [v for v in verdicts if v.verdict == INCONCLUSIVE]
    if inconclusive:
        return Verdict(
            "all", INCONCLUSIVE, [f"{v.gate}: {r}" for v in inconclusive for r in v.reasons], observed
        )
    return Verdict("all", PASS, [f"{v.gate}: pass" for v in verdicts], observed)


class StrictJSON(DefaultJSONProvider):
    """Flask's JSON with no NaN/Infinity ever: a float that is not finite is written as Prometheus spells it."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs.setdefault("default", self.default)
        kwargs.setdefault("ensure_ascii", self.ensure_ascii)
        kwargs.setdefault("sort_keys", self.sort_keys)
        return json.dumps(_finite(obj), allow_nan=False, **kwargs)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


ops = Blueprint("ops", __name__)


@ops.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


def _known_caller() -> bool:
    settings: AnalysisSettings = current_app.extensions["driftguard"]["settings"]
    return (
        settings.auth == "none" or settings.callers.find(request.headers.get("Authorization", "")) is not None
    )


@ops.get("/readyz")
def readyz() -> Response:
    # a probe gets the status word only; what the provider serves is for its callers (issue 31)
    if not _known_caller():
        return jsonify({"status": "ready"})
    return jsonify({"status": "ready", "gates": [*GATES, "all"]})


@ops.get("/metrics")
def metrics() -> Response | tuple[Response, int]:
    settings: AnalysisSettings = current_app.extensions["driftguard"]["settings"]
    # any known caller may scrape: the counters say nothing about any one Application
    if settings.auth == "token" and settings.callers.find(request.headers.get("Authorization", "")) is None:
        return jsonify({"error": "missing or wrong bearer token"}), 401
    body, content_type = exposition()
    return Response(body, content_type=content_type)


@ops.get("/openapi.json")
def openapi_json() -> Response | tuple[Response, int]:
    if not _known_caller():
        return jsonify({"error": "missing or wrong bearer token"}), 401
    return jsonify(openapi.spec())


def _windows(path: str) -> list[SyncWindow]:
    if not path:
        return []
    try:
        from pathlib import Path

        raw = safe_load(Path(path).read_text())
    except Exception as exc:
        raise ConfigError("DRIFTGUARD_ANALYSIS_FREEZE_FILE", f"{path}: {exc}") from exc
    items = raw.get("windows") if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise ConfigError(
            "DRIFTGUARD_ANALYSIS_FREEZE_FILE",
            "must be a list of windows (Argo CD syncWindow format), or {windows: [...]}",
        )
    try:
        return [SyncWindow.from_dict(w, origin=f"freeze file [{i}]") for i, w in enumerate(items)]
    except InputError as exc:
        raise ConfigError("DRIFTGUARD_ANALYSIS_FREEZE_FILE", str(exc)) from exc


def create_app(
    settings: AnalysisSettings | None = None, *, now: Callable[[], datetime] | None = None
) -> Flask:
    settings = settings or AnalysisSettings.from_env()
    if settings.argocd is None:
        raise ConfigError("DRIFTGUARD_ARGOCD_URL", "is required")
    # Rollouts waits 10 s per measurement: one attempt within our own timeout, no retries here
    argocd = ArgoCDClient(
        replace(settings.argocd, retries=0, timeout=min(settings.argocd.timeout, settings.timeout))
    )
    prometheus = (
        Prometheus(settings.prometheus_url, timeout=settings.timeout, token=settings.prometheus_token)
        if settings.prometheus_url
        else None
    )
    system_rules = system_rules_from_file(settings.argocd_cm_file)
    lookups: Coalescing[Any] = Coalescing(settings.cache_ttl)
    ctx = GateContext(
        argocd=argocd,
        prometheus=prometheus,
        windows=_windows(settings.freeze_file),
        system_rules=system_rules,
        redactor=Redactor(salt=settings.redact_key),
        jq=JqRunner(),
        now=now or (lambda: datetime.now(UTC)),
        cached=lookups.get,
        identities=NotifierIdentities(
            settings.notifier_url,
            token=settings.notifier_read_token,
            timeout=settings.notifier_timeout,
            ca_file=settings.notifier_ca_file,
        )
        if settings.notifier_url
        else None,
        queries=settings.queries,
    )
    app = Flask("driftguard-analysis")
    app.json = StrictJSON(app)
    app.extensions["driftguard"] = {
        "settings": settings,
        "ctx": ctx,
        "cache": Coalescing(settings.cache_ttl),
        # gates run here so the request thread can stop waiting at its deadline; a thread held by an
        # upstream that trickles its headers is freed when that upstream's socket read times out
        "pool": ThreadPoolExecutor(max_workers=32, thread_name_prefix="driftguard-gate"),
    }
    app.register_blueprint(bp)
    app.register_blueprint(ops)

    @app.errorhandler(404)
    def not_found(_: Exception) -> tuple[Response, int]:
        return jsonify({"error": "no such endpoint; gates live at /v1/gates/<gate>"}), 404

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> tuple[Response, int]:
        return jsonify({"error": exc.description or exc.name}), exc.code or 500

    @app.errorhandler(Exception)
    def internal(exc: Exception) -> tuple[Response, int]:  # Rollouts reads a non-JSON body as a pass
        app.logger.exception("gate failed unexpectedly")
        return jsonify({"error": f"internal error ({type(exc).__name__}); see the provider's log"}), 500

    return app

"""``create_app()``: Argo Rollouts web metric gates, for ``gunicorn 'analysis_provider.app:create_app()'``.

Every decided verdict is HTTP 200 with JSON (``jsonPath: "{$.ok}"`` and ``successCondition:
result == true`` read it). Non-2xx only when the gate could not decide: 400 bad arguments, 401,
404 unknown gate, 502/503/504 when Argo CD or Prometheus failed; Rollouts counts those as an
Error, never as a pass. An Application that does not exist is a decided ``fail``.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request

from analysis_provider.cache import Coalescing
from analysis_provider.gates import FAIL, GATES, INCONCLUSIVE, PASS, GateContext, Verdict
from analysis_provider.gates.base import APP_ARGS, Arg, parse_args
from analysis_provider.gates.success_rate import SuccessRateGate
from analysis_provider.prometheus import Prometheus
from analysis_provider.settings import AnalysisSettings
from driftguard.argocd import ArgoCDClient
from driftguard.errors import (
    ConfigError,
    InputError,
    NotFound,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from driftguard.ignore import JqRunner, rules_from_argocd_cm
from driftguard.manifests import load_file, safe_load
from driftguard.redact import Redactor
from driftguard.windows import SyncWindow

__all__ = ["create_app"]

bp = Blueprint("gates", __name__)
ALL_ARGS: dict[str, Arg] = {**APP_ARGS, **SuccessRateGate.args}


class _Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[tuple[str, str], int] = {}

    def inc(self, gate: str, outcome: str) -> None:
        with self.lock:
            self.values[(gate, outcome)] = self.values.get((gate, outcome), 0) + 1


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _error(status: int, message: str, gate: str) -> tuple[Response, int]:
    current_app.extensions["driftguard"]["counters"].inc(gate, str(status))
    return jsonify({"error": message, "gate": gate, "checkedAt": _now_iso()}), status


@bp.get("/v1/gates/<gate>")
def gate(gate: str) -> tuple[Response, int]:
    state = current_app.extensions["driftguard"]
    settings: AnalysisSettings = state["settings"]
    if settings.auth == "token":
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, f"Bearer {settings.token}".encode()):
            return _error(401, "missing or wrong bearer token", gate)
    raw = {k: v for k, v in request.args.items()}
    try:
        if gate == "all":
            verdict = _all(parse_args(ALL_ARGS, raw), state)
        elif gate in GATES:
            g = GATES[gate]
            args = parse_args(g.args, raw)
            verdict = _decide(g.name, args, state)
        else:
            return _error(404, f"unknown gate {gate!r}; gates: {', '.join([*GATES, 'all'])}", gate)
    except InputError as exc:
        return _error(400, str(exc), gate)
    except UpstreamTimeout as exc:
        return _error(504, str(exc), gate)
    except UpstreamUnavailable as exc:
        status = 503 if "unreachable" in str(exc) else 502
        return _error(status, str(exc), gate)
    except UpstreamError as exc:
        return _error(502, str(exc), gate)
    state["counters"].inc(gate, verdict.verdict)
    return jsonify(verdict.to_json(_now_iso())), 200


def _decide(name: str, args: dict[str, Any], state: dict[str, Any]) -> Verdict:
    key = (name, tuple(sorted((k, str(v)) for k, v in args.items())))
    ctx: GateContext = state["ctx"]

    def run() -> Verdict:
        try:
            return GATES[name].evaluate(args, ctx)
        except NotFound:
            where = f"{args.get('appNamespace') or 'default namespace'}"
            return Verdict(name, FAIL, [f"application not found: {args.get('app')} ({where})"], {})

    result: Verdict = state["cache"].get(key, run)
    return result


def _all(args: dict[str, Any], state: dict[str, Any]) -> Verdict:
    app_args = {"app": args["app"], "appNamespace": args["appNamespace"]}
    names = ["drift", "sync", "freeze"]
    if args.get("query") or args.get("service"):
        names.append("success-rate")
    verdicts: list[Verdict] = []
    errors: list[UpstreamError] = []
    for name in names:
        sub = app_args if name != "success-rate" else {k: args[k] for k in SuccessRateGate.args}
        try:
            verdicts.append(_decide(name, sub, state))
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


ops = Blueprint("ops", __name__)


@ops.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


@ops.get("/readyz")
def readyz() -> Response:
    return jsonify({"status": "ready", "gates": [*GATES, "all"]})


@ops.get("/metrics")
def metrics() -> Response:
    counters: _Counters = current_app.extensions["driftguard"]["counters"]
    cache: Coalescing[Any] = current_app.extensions["driftguard"]["cache"]
    lines = [
        "# HELP driftguard_analysis_requests_total Gate requests by gate and outcome (verdict or HTTP status).",
        "# TYPE driftguard_analysis_requests_total counter",
    ]
    with counters.lock:
        lines += [
            f'driftguard_analysis_requests_total{{gate="{g}",outcome="{o}"}} {n}'
            for (g, o), n in sorted(counters.values.items())
        ]
    lines += [
        "# HELP driftguard_analysis_evaluations_total Gate evaluations that were not served from the cache.",
        "# TYPE driftguard_analysis_evaluations_total counter",
    ]
    lines.append(f"driftguard_analysis_evaluations_total {cache.computed}")
    return Response("\n".join(lines) + "\n", mimetype="text/plain; version=0.0.4")


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
    system_rules = []
    if settings.argocd_cm_file:
        from pathlib import Path

        where = Path(settings.argocd_cm_file)
        data = (
            {f.name: f.read_text() for f in where.iterdir() if f.is_file()}
            if where.is_dir()
            else load_file(where, require_identity=False)[0].obj
        )
        system_rules = rules_from_argocd_cm(data)
    lookups: Coalescing[Any] = Coalescing(settings.cache_ttl)
    ctx = GateContext(
        argocd=argocd,
        prometheus=prometheus,
        windows=_windows(settings.freeze_file),
        system_rules=system_rules,
        redactor=Redactor(salt=settings.redact_salt),
        jq=JqRunner(),
        now=now or (lambda: datetime.now(UTC)),
        cached=lookups.get,
    )
    app = Flask("driftguard-analysis")
    app.extensions["driftguard"] = {
        "settings": settings,
        "ctx": ctx,
        "cache": Coalescing(settings.cache_ttl),
        "counters": _Counters(),
    }
    app.register_blueprint(bp)
    app.register_blueprint(ops)

    @app.errorhandler(404)
    def not_found(_: Exception) -> tuple[Response, int]:
        return jsonify({"error": "no such endpoint; gates live at /v1/gates/<gate>"}), 404

    return app

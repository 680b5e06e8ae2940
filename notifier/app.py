"""``create_app()``: the notifier's Flask app, for ``gunicorn 'notifier.app:create_app()'``.

Nothing is read from the environment at import time; everything is validated here, so a bad
setting stops start-up with a message naming it. ``create_app(parts=...)`` serves only some parts
(notifier/settings.py ``PARTS``) and loads only what they need: the admission listener
(``parts=("admission",)``) reads neither the channels' config nor their secrets, nor Argo CD's
token, and registers no other route than ``/v1/admission`` and the probes.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from driftguard.argocd import ArgoCDClient
from driftguard.argocd_cm import system_rules_from_file
from driftguard.errors import ConfigError
from driftguard.redact import Redactor
from notifier import audit, ops, webhook, whois
from notifier.alerts.expand import Expander
from notifier.alerts.worker import Worker
from notifier.channels import Channel, build_channels
from notifier.config import NotifierConfig, load_config
from notifier.identity import IdentityStore, OutboxIdentityStore, Recorder
from notifier.journal import Journal, OutboxJournal
from notifier.journal import routes as journal_routes
from notifier.logs import configure, event
from notifier.metrics import NotifierMetrics
from notifier.outbox import Outbox, open_outbox
from notifier.render import Templates
from notifier.settings import PARTS, NotifierSettings
from notifier.witness import WitnessStore

__all__ = ["State", "create_app", "load"]


@dataclass
class State:
    """What the blueprints and the worker share inside one process."""

    settings: NotifierSettings
    config: NotifierConfig | None
    """None in a process without the ``alerts`` part (the config and its channel secrets are not read)."""
    channels: dict[str, Channel]
    outbox: Outbox
    worker: Worker | None
    metrics: NotifierMetrics
    identities: IdentityStore
    journal: Journal
    recorder: Recorder
    witnesses: WitnessStore | None = None
    """The admission witness (notifier/witness.py); None while identity is not configured."""
    redactor: Redactor | None = None


def load(
    settings: NotifierSettings | None = None,
    *,
    config: NotifierConfig | None = None,
    parts: tuple[str, ...] = PARTS,
) -> tuple[NotifierSettings, NotifierConfig | None, dict[str, Channel], Outbox]:
    """Everything start-up validates for ``parts``: settings, config, templates, channels and the outbox file.

    Without the ``alerts`` part there is no config and no channel (None, {}): nothing of theirs is read.
    """
    settings = settings or NotifierSettings.from_env(parts=parts)
    if "alerts" not in parts:
        return settings, None, {}, open_outbox(settings)
    if settings.argocd is None:
        raise ConfigError("DRIFTGUARD_ARGOCD_URL", "is required")
    config = config or load_config(settings.config_file, argocd_url=settings.argocd.url)
    channels = build_channels(config, Templates(settings.templates_dir))
    return settings, config, channels, open_outbox(settings)


def create_app(
    settings: NotifierSettings | None = None,
    *,
    config: NotifierConfig | None = None,
    parts: tuple[str, ...] = PARTS,
) -> Flask:
    """The app serving ``parts`` (all of them by default); see notifier/settings.py ``PARTS``."""
    configure()
    parts = tuple(parts)
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise ConfigError(
            "--part", f"must name parts among {', '.join(PARTS)}, got {', '.join(unknown) or 'none'}"
        )
    settings, config, channels, outbox = load(settings, config=config, parts=parts)
    # the identity store and the drift journal live in the outbox's store, whichever it is: every
    # replica on one PostgreSQL shares them (docs/identity.md)
    identities = OutboxIdentityStore(
        outbox, retention=settings.identity_retention, max_rows=settings.identity_max_rows
    )
    journal = OutboxJournal(outbox)
    # identity is configured when the audit or admission webhook can be posted to; without it no
    # alert speaks of identity records (none could have matched)
    identity_on = bool(settings.audit_token) or settings.admission_auth == "none"
    witnesses = WitnessStore(outbox, retention=settings.identity_retention) if identity_on else None
    redactor = Redactor(salt=settings.redact_key)
    metrics = NotifierMetrics(channels, outbox.depth)
    worker: Worker | None = None
    if config is not None:
        assert settings.argocd is not None  # load() checked it
        expander = Expander(
            ArgoCDClient(settings.argocd),
            system_rules=system_rules_from_file(settings.argocd_cm_file),
            redactor=redactor,
            identities=identities if identity_on else None,
        )
        worker = Worker(
            outbox,
            expander,
            channels,
            config,
            metrics=metrics,
            dedup_window=settings.dedup_window,
            dead_letter_after=settings.dead_letter_after,
            recheck_interval=settings.recheck_interval,
            max_attempts=settings.max_attempts,
            max_retry_after=settings.max_retry_after,
            send_timeout=min(10.0, settings.lease * 0.4),
            journal=journal,
            retention=settings.retention,
            intake_window=settings.intake_window,
            witnesses=witnesses,
        )
    app = Flask("driftguard-notifier")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions["driftguard"] = State(
        settings,
        config,
        channels,
        outbox,
        worker,
        metrics,
        identities,
        journal,
        Recorder(identities, on_result=lambda outcome, n: metrics.identity("admission", outcome, n)),
        witnesses,
        redactor,
    )
    # one blueprint per part; the probes, /metrics and /openapi.json in every process
    blueprints = {
        "alerts": webhook.bp,
        "audit": audit.bp,
        "admission": audit.admission_bp,
        "journal": journal_routes.bp,
        "whois": whois.bp,
    }
    for part in PARTS:
        if part in parts:
            app.register_blueprint(blueprints[part])
    app.register_blueprint(ops.bp)

    @app.errorhandler(413)
    def too_large(_: Exception) -> tuple[Response, int]:
        return jsonify({"error": f"the body is larger than {settings.max_body_bytes} bytes"}), 413

    @app.errorhandler(404)
    def not_found(_: Exception) -> tuple[Response, int]:
        return jsonify({"error": "no such endpoint; see /openapi.json"}), 404

    @app.errorhandler(405)
    def not_allowed(_: Exception) -> tuple[Response, int]:
        return jsonify({"error": "method not allowed; see /openapi.json"}), 405

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> tuple[Response, int]:
        code = exc.code or 500
        return jsonify({"error": (exc.description or exc.name or "error")[:300]}), code

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> tuple[Response, int]:
        # one log line without a traceback or request data; the client learns only that it failed
        event("request_failed", level=40, error=type(exc).__name__)
        return jsonify({"error": "internal error; the notification was not stored, send it again"}), 500

    if settings.worker and worker is not None:
        worker.start()
        atexit.register(worker.stop)
    event(
        "started",
        channels=sorted(channels),
        routes=len(config.routes) if config is not None else 0,
        outbox=outbox.backend,
        where=str(settings.outbox) if outbox.backend == "sqlite" else getattr(outbox, "where", ""),
        worker=settings.worker,
    )
    return app

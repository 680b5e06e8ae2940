"""``driftguard-notifier preview``: the exact payload a channel would be sent, for template authors.

::

    driftguard-notifier preview --managed-resources managed.json --app app.json --channel feishu [--locale en]

``--managed-resources`` is Argo CD's answer to ``GET /api/v1/applications/<app>/managed-resources``
(``{"items": [...]}``), ``--app`` the Application (JSON or YAML). The report is built as the service
builds it (the Application's ignoreDifferences, argocd-cm rules from DRIFTGUARD_ARGOCD_CM_FILE,
Secret values masked) and rendered with the templates in DRIFTGUARD_NOTIFIER_TEMPLATES, so an
override is checked before it is deployed. Nothing is sent; no receiver URL or key is needed.
Time zone and Argo CD URL: ``timeZone``/``argocdUrl`` of DRIFTGUARD_NOTIFIER_CONFIG when set, else
the flags.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from driftguard.errors import DriftguardError
from notifier.channels import ALERT, FACTORIES, RESOLVE

__all__ = ["main"]

PLACEHOLDER_URL = "https://receiver.example.com/preview"


def _read(path: str, what: str) -> Any:
    from driftguard.manifests import safe_load

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SystemExit(f"driftguard-notifier preview: cannot read {what} {path}: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except ValueError:
        return safe_load(text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="driftguard-notifier preview", description="print the payload a channel would be sent"
    )
    parser.add_argument(
        "--managed-resources", required=True, help="Argo CD's managed-resources answer (JSON)"
    )
    parser.add_argument("--app", required=True, help="the Application (JSON or YAML)")
    parser.add_argument("--channel", required=True, choices=tuple(FACTORIES))
    parser.add_argument("--locale", choices=("zh-CN", "en"), default="")
    parser.add_argument(
        "--time-zone", default="", help="IANA zone for times (default: config timeZone, else UTC)"
    )
    parser.add_argument(
        "--argocd-url", default="", help="for the link (default: config argocdUrl or DRIFTGUARD_ARGOCD_URL)"
    )
    args = parser.parse_args(argv)
    try:
        print(json.dumps(render(args), ensure_ascii=False, indent=2))
    except DriftguardError as exc:
        print(f"driftguard-notifier preview: error: {exc}", file=sys.stderr)
        return 2
    return 0


def render(args: argparse.Namespace) -> dict[str, Any]:
    from driftguard.argocd_cm import system_rules_from_file
    from driftguard.redact import Redactor
    from driftguard.report import AppInfo, build_report
    from notifier.config import ChannelConfig, load_config, parse_config
    from notifier.render import Templates, view

    app = _read(args.app, "the Application")
    managed = _read(args.managed_resources, "the managed resources")
    items = managed.get("items", []) if isinstance(managed, dict) else managed
    env = os.environ
    config = (
        load_config(env["DRIFTGUARD_NOTIFIER_CONFIG"])
        if env.get("DRIFTGUARD_NOTIFIER_CONFIG")
        else parse_config({"channels": {"preview": {"type": args.channel, "url": PLACEHOLDER_URL}}})
    )
    factory = FACTORIES[args.channel]
    locale = args.locale or str(getattr(factory, "default_locale", "en"))
    zone = args.time_zone or config.time_zone
    if args.time_zone:
        parse_config(
            {"timeZone": zone, "channels": {"x": {"type": "slack", "url": PLACEHOLDER_URL}}}
        )  # validates
    templates = Templates(env.get("DRIFTGUARD_NOTIFIER_TEMPLATES", ""))
    cfg = ChannelConfig("preview", args.channel, url=PLACEHOLDER_URL, routing_key="0" * 32, locale=locale)
    channel = factory(cfg, templates, locale=locale, time_zone=zone)
    key = env.get("DRIFTGUARD_REDACT_KEY", "").encode()
    report = build_report(
        app,
        items,
        system_rules=system_rules_from_file(env.get("DRIFTGUARD_ARGOCD_CM_FILE", "")),
        # with the service's key, masks read as the alerts' do; without it, a random key per run
        redactor=Redactor(salt=key) if key else Redactor(),
    )
    base = (args.argocd_url or config.argocd_url or env.get("DRIFTGUARD_ARGOCD_URL", "")).rstrip("/")
    info: AppInfo = report.app
    link = f"{base}/applications/{info.namespace}/{info.name}" if base else ""
    kind = ALERT if report.alerting else RESOLVE
    return channel.payload(view(report, link=link, kind=kind), kind=kind)

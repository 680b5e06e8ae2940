"""Message text from jinja2 templates, per channel and locale, overridable from a mounted directory.

Each ``<channel>.<locale>.j2`` defines macros (``title``, ``summary``, ``resource`` ...) that the
channel modules call with a plain-data view of the DriftReport. A broken override fails at
start-up: every macro is rendered once against a sample report before the app serves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from driftguard.errors import ConfigError
from driftguard.report import DriftReport

__all__ = ["MACROS", "Templates", "view"]

MACROS: dict[str, tuple[str, ...]] = {
    "feishu": ("title", "summary", "resource", "more", "button", "resolved_title", "resolved_body"),
    "slack": ("header", "summary", "resource", "context", "more", "fallback", "resolved"),
    "pagerduty": ("summary",),
}
LOCALES = ("zh-CN", "en")


def _value(v: Any, limit: int = 120) -> str:
    text = (
        "∅"
        if v is None
        else (v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True, default=str))
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mrkdwn(v: Any) -> str:
    return str(v).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def view(report: DriftReport, *, link: str = "", kind: str = "alert", severity: str = "") -> dict[str, Any]:
    """What templates see: plain data, alerting changes grouped by resource."""
    resources: dict[str, dict[str, Any]] = {}
    for c in report.alerting:
        key = str(c.resource)
        res = resources.setdefault(
            key,
            {
                "key": key,
                "kind": c.resource.kind,
                "group": c.resource.group,
                "namespace": c.resource.namespace,
                "name": c.resource.name,
                "changes": [],
            },
        )
        res["changes"].append(c.to_json())
    return {
        "kind": kind,
        "app": dict(report.app.__dict__),
        "severity": severity or report.severity,
        "resources": list(resources.values()),
        "total": len(report.alerting),
        "suppressed": report.suppressed,
        "link": link,
        "fingerprint": report.fingerprint(),
    }


class Templates:
    """Loads, checks and renders the message templates."""

    def __init__(self, override_dir: str = "") -> None:
        import jinja2

        loaders: list[jinja2.BaseLoader] = []
        if override_dir:
            if not Path(override_dir).is_dir():
                raise ConfigError("DRIFTGUARD_NOTIFIER_TEMPLATES", f"{override_dir} is not a directory")
            loaders.append(jinja2.FileSystemLoader(override_dir))
        loaders.append(jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")))
        # chat text and markdown, not HTML: escaping is per channel (the `mrkdwn` filter for Slack)
        loader = jinja2.ChoiceLoader(loaders)
        self.env = jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, autoescape=False)  # noqa: S701
        self.env.filters["v"] = _value
        self.env.filters["mrkdwn"] = _mrkdwn
        self._modules: dict[tuple[str, str], Any] = {}
        self._check()

    def _check(self) -> None:
        from driftguard.report import AppInfo

        sample = view(
            DriftReport(AppInfo("sample-app")),
            link="https://argocd.example.com/applications/argocd/sample-app",
        )
        sample["resources"] = [
            {
                "key": "Deployment.apps ns/x",
                "kind": "Deployment",
                "group": "apps",
                "namespace": "ns",
                "name": "x",
                "changes": [
                    {
                        "path": "/spec/replicas",
                        "op": "replace",
                        "old": 1,
                        "new": 2,
                        "class": "human",
                        "reason": "",
                        "actor": {
                            "manager": "kubectl-edit",
                            "operation": "Update",
                            "time": "2026-01-01T00:00:00Z",
                        },
                        "resource": {"group": "apps", "kind": "Deployment", "namespace": "ns", "name": "x"},
                    }
                ],
            }
        ]
        sample["total"] = 1
        for channel, macros in MACROS.items():
            for locale in LOCALES:
                name = f"{channel}.{locale}.j2"
                try:
                    module = self.env.get_template(name).module
                    for macro in macros:
                        fn = getattr(module, macro)
                        fn(5) if macro == "more" else fn(
                            sample["resources"][0]
                        ) if macro == "resource" else fn(sample)
                except Exception as exc:
                    raise ConfigError(
                        "DRIFTGUARD_NOTIFIER_TEMPLATES",
                        f"template {name} is broken: {type(exc).__name__}: {exc}",
                    ) from exc
                self._modules[(channel, locale)] = module

    def render(self, channel: str, locale: str, macro: str, arg: Any) -> str:
        """One macro's text, whitespace at the ends trimmed."""
        return str(getattr(self._modules[(channel, locale)], macro)(arg)).strip()

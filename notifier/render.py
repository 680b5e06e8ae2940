"""Message text from jinja2 templates, per channel and locale, overridable from a mounted directory.

Each ``<channel>.<locale>.j2`` defines macros (``title``, ``summary``, ``resource`` ...) that the
channel modules call with a plain-data view of the DriftReport. The channels and their macros are
read from the shipped templates (``STOCK``): a channel's template pair is all this module needs to
know of it. A broken override fails at start-up: every macro is rendered against a matrix of
samples (every class, each optional field absent, every notice) before the app serves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from driftguard.cause import CHART_DEFAULT, FAILED, REFUSED, VALUE, Cause, GatingKey
from driftguard.diff import FieldChange
from driftguard.drift import ALERTING, CLASSES, HUMAN, MISSING, PRUNE_CANDIDATE, Actor, Classified
from driftguard.errors import ConfigError
from driftguard.identity import who
from driftguard.manifests import ResourceKey
from driftguard.report import SEVERITIES, AppInfo, DriftReport
from notifier.config import LOCALES
from notifier.digest import PROTECTED_KINDS as PROTECTED_KIND_NAMES
from notifier.digest import digest, localize_notice, readable_path

__all__ = [
    "FALLBACK_TEXT",
    "Templates",
    "change_view",
    "fallback_view",
    "notice_view",
    "sample_views",
    "view",
]

STOCK = Path(__file__).parent / "templates"
"""The shipped templates: one ``<channel>.<locale>.j2`` per registered channel and locale."""
ADDED_MACROS = frozenset({"cause", "resource_button"})
"""Macros newer than some overrides: an override without them keeps the stock ones (it still starts)."""
NOTICE_EVENTS = ("sync-failed", "render-refused", "prune-pending", "drift-reverted")

# The last-resort alert is plain Python text, not a template: it goes out when templates or the
# Argo CD lookup are what failed, so it must depend on neither.
FALLBACK_TEXT = {
    "en": "driftguard could not build the detailed alert for {app}: {reason}; open {link}",
    "zh-CN": "driftguard 无法生成 {app} 的详细告警：{reason}；请打开 {link} 查看",
}


def _value(v: Any, limit: int = 120) -> str:
    text = (
        "∅"
        if v is None
        else (v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True, default=str))
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mrkdwn(v: Any) -> str:
    return str(v).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def change_view(c: Classified, *, now: float | None = None) -> dict[str, Any]:
    """One change as templates see it: every key present (``actor`` and ``who`` empty when nobody is known).

    ``who`` is the actor line, ``alice@example.com via kubectl-patch, 14:02:07 (3 min ago)``
    (driftguard/identity.py ``who``); templates print it as they like.
    """
    out = c.to_json()
    out["readable"] = readable_path(c.change.path, c.change.segments)
    actor = out.get("actor")
    out["actor"] = (
        {
            "manager": actor.get("manager") or "",
            "operation": actor.get("operation") or "",
            "time": actor.get("time"),
            "user": actor.get("user") or "",
            "source": actor.get("source") or "",
            "matched": actor.get("matched"),
        }
        if isinstance(actor, dict)
        else None
    )
    a = c.actor
    out["who"] = who(manager=a.manager, time=a.time, user=a.user, matched=a.matched, now=now) if a else ""
    return out


def _resources(changes: list[Classified]) -> list[dict[str, Any]]:
    resources: dict[str, dict[str, Any]] = {}
    for c in changes:
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
        res["changes"].append(change_view(c))
    return list(resources.values())


def view(report: DriftReport, *, link: str = "", kind: str = "alert", severity: str = "") -> dict[str, Any]:
    """What templates see: plain data, alerting changes grouped by resource."""
    return {
        "kind": kind,
        "app": dict(report.app.__dict__),
        "severity": severity or report.severity,
        "resources": _resources(report.alerting),
        "total": len(report.alerting),
        "suppressed": report.suppressed,
        "link": link,
        "fingerprint": report.fingerprint(),
        "who": _first_who(report.alerting),
        # why the render is not there (driftguard/cause.py): None when Argo CD reports no failure
        "cause": report.cause.to_json() if report.cause else None,
    }


def _first_who(changes: list[Classified]) -> str:
    """The report's actor line: the first human change's person (else its manager), for PagerDuty's ``actor``."""
    ranked = sorted(
        (c for c in changes if c.actor), key=lambda c: (c.cls != HUMAN, not c.actor or not c.actor.user)
    )
    return change_view(ranked[0])["who"] if ranked else ""


def notice_view(
    app: AppInfo,
    *,
    event: str,
    message: str = "",
    lines: list[str] | None = None,
    counts: dict[str, int] | None = None,
    link: str = "",
    severity: str = "error",
) -> dict[str, Any]:
    """A trigger's own message (sync failed, render refused, prunes pending, drift reverted): no field diff.

    ``label`` says what a ComparisonError is (notifier/alerts/notices.py label_of), ``names`` the resources
    a refused render would prune (protected kinds first), ``protected`` which of ``counts`` are
    protected kinds; ``reverted`` and ``capture`` belong to the drift-reverted notice (notifier/alerts/reverted.py).
    """
    return {
        "kind": "notice",
        "event": event,
        "app": dict(app.__dict__),
        "severity": severity,
        "message": message,
        "lines": list(lines or []),
        "counts": dict(counts or {}),
        "protected": [k for k in (counts or {}) if k in PROTECTED_KIND_NAMES],
        "names": [],
        "label": "",
        "reverted": None,
        "capture": "",
        "link": link,
    }


def fallback_view(app: AppInfo, *, reason: str, link: str = "") -> dict[str, Any]:
    """The plain alert sent when the detailed one cannot be built."""
    return {
        "kind": "fallback",
        "app": dict(app.__dict__),
        "severity": "error",
        "reason": reason,
        "link": link,
    }


def fallback_text(v: dict[str, Any], locale: str) -> str:
    template = FALLBACK_TEXT.get(locale, FALLBACK_TEXT["en"])
    return template.format(app=v["app"]["name"], reason=v["reason"], link=v["link"] or "Argo CD")


def sample_views() -> list[dict[str, Any]]:
    """The start-up self-check's matrix: every class, with and without each optional field, every notice."""
    full = AppInfo(
        "sample-app",
        project="sample",
        cluster="prod-1",
        destination_namespace="shop",
        revision="0123456789abcdef0123456789abcdef01234567",
        sync_status="OutOfSync",
        health_status="Healthy",
        operation_phase="Succeeded",
    )
    bare = AppInfo("sample-app")
    actors = (
        Actor("kubectl-edit", "Update", "2026-01-01T00:00:00Z"),
        Actor(
            "kubectl-patch",
            "Update",
            "2026-01-01T00:00:00Z",
            user="alice@example.com",
            source="audit",
            matched=True,
        ),
        Actor("kubectl-patch", matched=False),
        None,
    )
    values: tuple[tuple[Any, Any], ...] = (
        (1, 2),
        (None, {"a": [1, "x"]}),
        ("old", None),
        ("", "新值 <&>"),
    )
    keys = (ResourceKey("apps", "Deployment", "shop", "api"), ResourceKey("", "Namespace", "", "shop"))
    link = "https://argocd.example.com/applications/argocd/sample-app"
    changes = []
    for i, cls in enumerate(CLASSES):
        for j, actor in enumerate(actors):
            old, new = values[(i + j) % len(values)]
            key = keys[(i + j) % len(keys)]
            path = "" if cls in (MISSING, PRUNE_CANDIDATE) else "/spec/replicas"
            changes.append(Classified(key, FieldChange(path, "replace", old, new), cls, actor))
    causes = (
        Cause(
            REFUSED,
            "the render would prune 3 of 5 resources",
            "shrink",
            (GatingKey("enabled", CHART_DEFAULT, "templates/deployment.yaml:1"), GatingKey("w.on", VALUE)),
        ),
        Cause(REFUSED, "helm rendered 0 resources", "empty"),
        Cause(FAILED, "helm template: parse error"),
        None,
    )
    views: list[dict[str, Any]] = []
    for n, severity in enumerate(SEVERITIES):
        for app, with_link in ((full, True), (bare, False)):
            v = view(DriftReport(app, cause=causes[n % len(causes)]), link=link if with_link else "")
            # every class with each actor shape once per app shape; the severities share the work
            v["resources"] = _resources(changes) if n == 0 else _resources(changes[:1])
            v["total"] = len(changes)
            v["suppressed"] = {c: 1 for c in CLASSES if c not in ALERTING} if with_link else {}
            v["severity"] = severity
            views.append(v)
    views.append(view(DriftReport(bare)))  # nothing alerting: a resolve
    for event in NOTICE_EVENTS:
        views.append(
            notice_view(
                full, event=event, message="one\ntwo", lines=["a", "b"], counts={"Deployment": 2}, link=link
            )
        )
        views.append(notice_view(bare, event=event))
    for label in ("refused", "git", "repository", "cluster", "other"):
        v = notice_view(
            full,
            event="render-refused",
            message="driftguard: refused by shrink: x\nline two",
            counts={"PersistentVolumeClaim": 1, "Deployment": 2},
            link=link,
        )
        views.append({**v, "label": label, "names": ["PersistentVolumeClaim shop/data"]})
    for by, capture in (("self-heal", "off"), ("sync", "on"), ("", "off")):
        v = notice_view(full, event="drift-reverted", lines=["Deployment shop/api"], link=link)
        views.append(
            {
                **v,
                "reverted": {"at": "2026-01-01T00:00:00Z", "by": by, "witnessed": False},
                "capture": capture,
            }
        )
    reverted = view(DriftReport(full), link=link)
    reverted["resources"] = _resources(changes[:2])
    reverted["total"] = 2
    views.append(
        {**reverted, "reverted": {"at": "2026-01-01T00:00:00Z", "by": "self-heal", "witnessed": True}}
    )
    return views


_COMPILED: dict[str, bytes] = {}
"""Compiled templates by jinja's bucket key, for every Templates of this process (a test suite or a
``check-config`` builds many): jinja checks each against its source's checksum before using it."""


def _compiled_cache() -> Any:
    """jinja2's bytecode cache, kept in this process's memory: parsing and compiling the shipped
    templates is ~0.3 s of each start; a source that changed is compiled again (the checksum)."""
    import jinja2

    class InMemory(jinja2.BytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            data = _COMPILED.get(bucket.key)
            if data is not None:
                bucket.bytecode_from_string(data)

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            _COMPILED[bucket.key] = bucket.bytecode_to_string()

    return InMemory()


class Templates:
    """Loads, checks and renders the message templates."""

    def __init__(self, override_dir: str = "") -> None:
        import jinja2

        loaders: list[jinja2.BaseLoader] = []
        if override_dir:
            if not Path(override_dir).is_dir():
                raise ConfigError("DRIFTGUARD_NOTIFIER_TEMPLATES", f"{override_dir} is not a directory")
            loaders.append(jinja2.FileSystemLoader(override_dir))
        loaders.append(jinja2.FileSystemLoader(str(STOCK)))
        # chat text and markdown, not HTML: escaping is per channel (the `mrkdwn` filter for Slack)
        loader = jinja2.ChoiceLoader(loaders)
        compiled = _compiled_cache()
        self.env = jinja2.Environment(
            loader=loader,
            undefined=jinja2.StrictUndefined,
            autoescape=False,  # noqa: S701
            bytecode_cache=compiled,
        )
        stock = loaders[-1]  # the shipped templates alone, for macros an older override lacks
        self.stock = jinja2.Environment(
            loader=stock,
            undefined=jinja2.StrictUndefined,
            autoescape=False,  # noqa: S701
            bytecode_cache=compiled,
        )
        for env in (self.env, self.stock):
            env.filters["v"] = _value
            env.filters["mrkdwn"] = _mrkdwn
        self._macro_type = jinja2.runtime.Macro
        self._macros: dict[tuple[str, str, str], Any] = {}
        self._check()

    def macros(self) -> dict[str, tuple[str, ...]]:
        """Every channel with shipped templates, and the macros its English template defines, in order."""
        out: dict[str, tuple[str, ...]] = {}
        for path in sorted(STOCK.glob("*.en.j2")):
            channel = path.name.removesuffix(".en.j2")
            module = self.stock.get_template(path.name).module
            names = [n for n, v in vars(module).items() if isinstance(v, self._macro_type)]
            source = path.read_text()
            out[channel] = tuple(sorted(names, key=lambda n: source.find(f"macro {n}(")))
        return out

    def _check(self) -> None:
        views = sample_views()
        digests = [None if v["kind"] == "notice" else digest(v) for v in views]  # one per view, not per macro
        for channel, macros in self.macros().items():
            for locale in LOCALES:
                name = f"{channel}.{locale}.j2"
                try:
                    module = self.env.get_template(name).module
                    for macro in macros:
                        fn = getattr(module, macro, None)
                        if fn is None and macro in ADDED_MACROS:
                            fn = getattr(self.stock.get_template(name).module, macro)
                        if fn is None:
                            raise AttributeError(f"no macro {macro}")
                        for v, d in zip(views, digests, strict=True):
                            _call(fn, macro, v, d)
                        self._macros[(channel, locale, macro)] = fn
                except Exception as exc:
                    raise ConfigError(
                        "DRIFTGUARD_NOTIFIER_TEMPLATES",
                        f"template {name} is broken: {type(exc).__name__}: {exc}",
                    ) from exc

    def channels(self) -> frozenset[str]:
        """The channels whose template pair was loaded and checked here (start-up)."""
        return frozenset(channel for channel, _, _ in self._macros)

    def render(self, channel: str, locale: str, macro: str, arg: Any) -> str:
        """One macro's text, whitespace at the ends trimmed."""
        return str(self._macros[(channel, locale, macro)](arg)).strip()


def _call(fn: Any, macro: str, v: dict[str, Any], d: dict[str, Any] | None) -> None:
    """Call a macro the way the channels do, with its part of a sample view (raw: escaping is the channel's)."""
    kind = v["kind"]
    if macro.startswith("notice_"):
        if kind == "notice":
            fn(localize_notice(v, ZoneInfo("UTC"), "en"))
            fn(localize_notice(v, ZoneInfo("Asia/Shanghai"), "zh-CN"))
        return
    if kind == "notice" or d is None:
        return
    if macro == "more":
        for m in MORE_SAMPLES:
            fn({**m, "total": d["total"]})
    elif macro == "group":
        for g in d["groups"]:
            fn(g)
    elif macro == "change":
        for f in d["fields"]:
            fn(f)
    else:
        fn(d)


MORE_SAMPLES = (
    {"fields": 0, "kinds": 0, "resources": 0},
    {"fields": 3, "kinds": 0, "resources": 0},
    {"fields": 0, "kinds": 2, "resources": 40},
    {"fields": 5, "kinds": 1, "resources": 7},
)

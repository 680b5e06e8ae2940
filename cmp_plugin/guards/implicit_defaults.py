"""implicit-defaults: values keys that decide whether whole resources render, left to the chart default.

The incident: production relied on the chart's ``enabled`` default; the default flipped, production
rendered nothing for that service and Argo CD pruned it. A key is *implicit* for an environment
when none of the values it supplies (``values-files``, ``values``) sets it.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any, NamedTuple

from cmp_plugin.gating import Gate, find_gates, lookup, merge_values, truthy
from cmp_plugin.guards.base import RENDER, GuardBase, GuardContext
from cmp_plugin.renderers.base import RenderJob
from cmp_plugin.renderers.helm import existing_values_files, set_values
from driftguard.errors import GuardRefusal, InputError
from driftguard.manifests import safe_load

__all__ = ["Finding", "ImplicitDefaultsGuard", "analyse"]

NOTE = "implicit-defaults"


class Finding(NamedTuple):
    """One gating key as this environment sees it."""

    gate: Gate
    explicit: bool
    default: Any
    value: Any
    renders: bool | None
    """True: the gated resources render now; False: hidden; None: the condition is too complex to say."""

    def describe(self) -> str:
        where = f"{self.gate.file}:{self.gate.line}"
        state = {True: "renders them now", False: "hides them now", None: "decides whether they render"}[
            self.renders
        ]
        gated = ", ".join(self.gate.resources[:3]) or "resources"
        if len(self.gate.resources) > 3:
            gated += f" and {len(self.gate.resources) - 3} more"
        origin = (
            "set by this environment"
            if self.explicit
            else f"not set here, chart default {_show(self.default)}"
        )
        return f"{self.gate.key} ({where}: {self.gate.condition}): {origin}; gates {gated}; {state}"


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    import json

    return json.dumps(value)


def analyse(job: RenderJob) -> list[Finding]:
    """Every gating key of the chart at ``job.app_dir`` for the values this environment supplies."""
    chart_dir = job.app_dir
    defaults = _chart_defaults(chart_dir)
    supplied: list[Any] = []
    for f, path in existing_values_files(job):  # ignore-missing-values-files leaves some out
        supplied.append(_load_values(path.read_text(), str(f)))
    if job.env.param("values").strip():
        supplied.append(_load_values(job.env.param("values"), "parameter values"))
    supplied.append(set_values(job))  # --set / --set-string / --set-file keys are set explicitly
    effective = defaults
    for doc in supplied:
        effective = merge_values(effective, doc)
    findings = []
    for gate in find_gates(chart_dir):
        explicit = any(lookup(doc, gate.key)[0] for doc in supplied)
        _, default = lookup(defaults, gate.key)
        _, value = lookup(effective, gate.key)
        findings.append(Finding(gate, explicit, default, value, _renders(gate, value)))
    return findings


def _renders(gate: Gate, value: Any) -> bool | None:
    cond = gate.condition.strip()
    simple = cond in (
        f"if .Values.{gate.key}",
        f"if $.Values.{gate.key}",
        f"with .Values.{gate.key}",
        f"range .Values.{gate.key}",
    )
    if gate.keyword in ("condition", "tags") or simple:
        return truthy(value)
    if cond in (f"if not .Values.{gate.key}", f"if not $.Values.{gate.key}"):
        return not truthy(value)
    return None


def _load_values(text: str, origin: str) -> Any:
    import yaml

    try:
        doc = safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{origin} is not valid YAML: {exc}") from exc
    if doc is not None and not isinstance(doc, dict):
        raise InputError(f"{origin} must be a YAML mapping of values")
    return doc or {}


def _chart_defaults(chart_dir: Path) -> Any:
    """The chart's values.yaml with each vendored subchart's defaults under its name or alias."""
    import yaml

    values = (
        _load_values((chart_dir / "values.yaml").read_text(), "values.yaml")
        if (chart_dir / "values.yaml").is_file()
        else {}
    )
    try:
        chart = safe_load((chart_dir / "Chart.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        chart = {}
    for dep in chart.get("dependencies") or [] if isinstance(chart, dict) else []:
        if not isinstance(dep, dict) or not dep.get("name"):
            continue
        sub = chart_dir / "charts" / str(dep["name"])
        if sub.is_dir():
            scope = str(dep.get("alias") or dep["name"])
            values = merge_values({scope: _chart_defaults(sub)}, values)
    return values


def matches_required(key: str, required: list[str]) -> bool:
    """An ``explicit-keys`` entry names a key exactly, by its last segments, or by glob."""
    return any(key == r or key.endswith("." + r) or fnmatch.fnmatchcase(key, r) for r in required)


class ImplicitDefaultsGuard(GuardBase):
    name = "implicit-defaults"
    stage = RENDER

    def begin(self, ctx: GuardContext) -> None:
        """Read the templates and values while helm renders: the analysis needs no render output."""
        if ctx.job.env.param("implicit-defaults") == "off" or ctx.renderer != "helm":
            return
        try:
            ctx.notes[NOTE] = analyse(ctx.job)
        except InputError as exc:
            ctx.notes[NOTE] = exc  # reported in check(), in the guards' order

    def check(self, ctx: GuardContext) -> list[str]:
        job = ctx.job
        mode = job.env.param("implicit-defaults")
        if mode == "off" or ctx.rendered is None or ctx.rendered.renderer != "helm":
            return []
        found = ctx.notes.get(NOTE)
        if isinstance(found, InputError):
            raise found
        findings = found if isinstance(found, list) else analyse(job)
        ctx.notes[NOTE] = findings
        implicit = [f for f in findings if not f.explicit]
        if not implicit:
            return []
        required = [k for k in job.env.param("explicit-keys") if k]
        must = [f for f in implicit if matches_required(f.gate.key, required)]
        refused = implicit if mode == "refuse" else must
        if refused:
            why = "refuse mode" if mode == "refuse" else "listed in explicit-keys"
            raise GuardRefusal(
                self.name,
                f"{len(refused)} values key(s) that decide whether resources render are not set by this environment ({why})",
                details=[f.describe() for f in refused],
                fix="set each key explicitly in this environment's values file (even to the chart's current default)",
            )
        return [f"driftguard: warning: implicit chart default: {f.describe()}" for f in implicit]

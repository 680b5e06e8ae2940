"""implicit-defaults: resource switches that this environment leaves to the chart default.

The incident: production relied on the chart's ``enabled`` default; the default flipped, production
rendered nothing for that service and Argo CD pruned it. A *finding* is a values key that
- decides whether at least one whole resource renders (cmp_plugin.gating: an if/with/range around
  a whole document, directly or through a named template, in the chart or an enabled subchart,
  or a dependency's ``condition`` / ``tags``),
- has a truthy chart default (an empty or false default renders nothing that could vanish),
- is not set by this environment (values files, inline values, helm set parameters), and
- whose resources are in this render now.
Everything else the scan saw is kept with its reason for ``render --explain``, the shrink guard
and the PR diff. In warn mode the guard prints one line per render; refuse and explicit-keys
refuse with one line per gate, naming template:line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cmp_plugin import chart_values as cv
from cmp_plugin.gate_eval import still_renders
from cmp_plugin.gating import ROOT, ChartScan, Gate, scan_chart
from cmp_plugin.guards.base import RENDER, GuardBase, GuardContext
from cmp_plugin.renderers.base import RenderJob
from cmp_plugin.renderers.helm import existing_values_files, set_values
from driftguard.errors import GuardRefusal, InputError

if TYPE_CHECKING:
    from cmp_plugin.scan import Doc

__all__ = [
    "Finding",
    "ImplicitDefaultsGuard",
    "Prepared",
    "all_gates",
    "analyse",
    "classify",
    "explain",
    "prepare",
    "summary_line",
    "supplied_values",
]

NOTE = "implicit-defaults"
SHOWN_KEYS = 4

FINDING = "finding"
SET = "set by this environment"
FALSY = "chart default is empty or false: nothing renders from it that could vanish"
DISABLED = "in a subchart that does not render"
NOT_RENDERED = "its resources are not in this render"
NOT_DECIDING = "the condition holds without it: turning it off would not remove the resources"


class Finding(NamedTuple):
    """One gating key as this environment sees it; ``verdict == FINDING`` for a real finding."""

    gate: Gate
    explicit: bool
    default: Any
    value: Any
    renders: bool | None
    """True: the gated resources are in this render; False: they are not; None: not known."""
    verdict: str = FINDING
    rendered: tuple[str, ...] = ()
    """``Kind name`` of the resources of this render that the gate decides."""
    why: str = ""
    """For DISABLED: the key that turned the subchart off."""

    @property
    def is_finding(self) -> bool:
        return self.verdict == FINDING

    def where(self) -> str:
        return f"{self.gate.file}:{self.gate.line}"

    def quoted(self) -> str:
        """The gate as written: ``{{ if .Values.enabled }}``, or the Chart.yaml entry."""
        g = self.gate
        if g.keyword == "condition":
            return f"condition: {g.expr}"
        if g.keyword == "tags":
            return f"tags: [{g.expr}]"
        scope = ""
        if g.dot not in (None, ROOT):
            scope = f" (. is .Values.{g.dot[len(g.scope) :] if g.dot.startswith(g.scope) else g.dot})"
        binds = "".join(f" ({name} is .Values.{path})" for name, path in g.variables)
        return "{{ " + g.condition + " }}" + scope + binds

    def describe(self) -> str:
        """One line naming key, template:line, the gate as written, what it decides and why it counts."""
        what = _resources(self.rendered or tuple(self.gate.resources))
        if self.explicit:
            origin = f"set by this environment to {_show(self.value)}"
        else:
            origin = f"not set here, chart default {_show(self.default)}"
        return f"{self.gate.key}: {self.where()} {self.quoted()} decides {what}; {origin}"


def _resources(items: tuple[str, ...]) -> str:
    if not items:
        return "resources"
    shown = ", ".join(items[:3])
    return shown + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def _show(value: Any) -> str:
    return "unset" if value is None else json.dumps(value, default=str)[:80]


class Prepared(NamedTuple):
    """What the analysis learns from the chart and the values, before the render's output is known."""

    scan: ChartScan
    defaults: dict[str, Any]
    supplied: list[dict[str, Any]]
    effective: dict[str, Any]
    subcharts: dict[str, tuple[bool, str]]
    """Subchart path -> (rendered, deciding key)."""
    deps: list[cv.Dependency]


def supplied_values(job: RenderJob) -> list[dict[str, Any]]:
    """Every values document this environment supplies, in helm's order of precedence."""
    docs: list[dict[str, Any]] = []
    for f, path in existing_values_files(job):  # ignore-missing-values-files leaves some out
        docs.append(cv.load_values(path.read_text(), str(f)))
    if job.env.param("values").strip():
        docs.append(cv.load_values(job.env.param("values"), "parameter values"))
    # --set / --set-string / --set-file keys are set explicitly (typed as helm's strvals types them)
    docs.append(set_values(job))
    return docs


def prepare(chart_dir: Path, supplied: list[dict[str, Any]], *, cache_dir: Path | None = None) -> Prepared:
    """Scan the templates and work out defaults, effective values and which subcharts render."""
    cv.use_cache(cache_dir)
    deps = cv.dependencies(chart_dir)
    own = cv.own_values(chart_dir)
    plain = cv.with_defaults(own, deps)
    effective = plain
    for doc in supplied:
        effective = cv.merge_values(effective, doc)
    on = cv.enabled(deps, effective)
    defaults = cv.with_defaults(own, deps, {p: v[0] for p, v in on.items()})
    effective = defaults
    for doc in supplied:
        effective = cv.merge_values(effective, doc)
    scan = scan_chart(chart_dir, subcharts=[d.sub for d in deps], cache_dir=cache_dir)
    return Prepared(scan, defaults, supplied, effective, on, deps)


def classify(prep: Prepared, docs: Iterable[Doc] | None) -> list[Finding]:
    """Every gate with its verdict; ``docs`` (the render) tells which resources render now."""
    rendered: dict[str, list[tuple[str, str]]] = {}
    if docs is not None:
        for d in docs:
            rel = d.source.split("/", 1)[1] if "/" in d.source else d.source
            rendered.setdefault(rel, []).append((d.kind, d.name))
    out: list[Finding] = []
    for gate in all_gates(prep):
        explicit = any(cv.lookup(doc, gate.key)[0] for doc in prep.supplied)
        _, default = cv.lookup(prep.defaults, gate.key)
        _, value = cv.lookup(prep.effective, gate.key)
        now: list[str] = []
        renders: bool | None = None
        if docs is not None:
            for src in gate.sources:
                if gate.keyword in ("condition", "tags"):
                    hits = [kn for rel, kns in rendered.items() if rel.startswith(src + "/") for kn in kns]
                else:
                    hits = rendered.get(src, [])
                for kind, name in hits:
                    if len(now) >= 8:
                        break  # enough to name them; the count of a gate's resources is not needed
                    if (
                        "?" in gate.resources
                        or kind in gate.resources
                        or gate.keyword in ("condition", "tags")
                    ):
                        now.append(f"{kind} {name}")
            renders = bool(now)
        off = _disabled_by(gate, prep)
        if off is not None:
            verdict = DISABLED
        elif explicit:
            verdict = SET
        elif not cv.truthy(default):
            verdict = FALSY
        elif renders is False:
            verdict = NOT_RENDERED
        elif still_renders(gate, prep.effective, lookup=cv.lookup):
            verdict = NOT_DECIDING
        else:
            verdict = FINDING
        out.append(
            Finding(gate, explicit, default, value, renders, verdict, tuple(dict.fromkeys(now)), off or "")
        )
    return out


def all_gates(prep: Prepared) -> list[Gate]:
    """The templates' gates and the Chart.yaml ``condition`` / ``tags`` keys that decide a subchart."""
    gates = list(prep.scan.gates)
    tags = prep.effective.get("tags") if isinstance(prep.effective.get("tags"), dict) else {}
    for d in prep.deps:
        if d.parent_path:
            continue  # nested dependencies are decided by the values under their parent: listed there
        sub = d.sub
        src = (sub.source,)
        decided_by_condition = False
        for cond in (c.strip() for c in sub.condition.split(",")):
            if not cond:
                continue
            found, value = cv.lookup(prep.effective, cond)
            gates.append(Gate(cond, "Chart.yaml", sub.line, "condition", sub.condition, ("?",), src))
            if found and isinstance(value, bool):
                decided_by_condition = True
                break  # helm: the first condition path holding a boolean decides, later ones are unread
        if not decided_by_condition:
            for tag in sub.tags:
                if isinstance(tags, dict) and tag in tags:
                    gates.append(Gate(f"tags.{tag}", "Chart.yaml", sub.line, "tags", tag, ("?",), src))
    return gates


def _disabled_by(gate: Gate, prep: Prepared) -> str | None:
    """The key that turns off the subchart a template gate sits in, or None."""
    if gate.keyword in ("condition", "tags") or not gate.file.startswith("charts/"):
        return None
    chart = gate.file.split("/templates/", 1)[0]
    on, why = prep.subcharts.get(chart, (True, ""))
    return None if on else (why or "its parent")


def analyse(job: RenderJob, docs: Iterable[Doc] | None = None) -> list[Finding]:
    """Every gating key of the chart at ``job.app_dir`` for the values this environment supplies."""
    return classify(prepare(job.app_dir, supplied_values(job)), docs)


def findings(switches: Iterable[Finding]) -> list[Finding]:
    return [f for f in switches if f.is_finding]


def summary_line(found: list[Finding]) -> str:
    """The one warn-mode line: how many switches rely on chart defaults, the first few named."""
    keys: dict[str, list[str]] = {}
    for f in found:
        keys.setdefault(f.gate.key, [])
        for r in f.rendered or tuple(f.gate.resources):
            if r not in keys[f.gate.key]:
                keys[f.gate.key].append(r)
    named = []
    # the switches that decide the most resources first (a stable sort keeps template order on ties)
    for key, res in sorted(keys.items(), key=lambda kv: -len(kv[1]))[:SHOWN_KEYS]:
        what = res[0] if res else "resources"
        if len(res) > 1:
            what += f" and {len(res) - 1} more"
        named.append(f"{key} ({what})")
    more = ", ... " if len(keys) > SHOWN_KEYS else ""
    return (
        f"driftguard: note: {len(keys)} resource switches rely on chart defaults: {', '.join(named)}{more}; "
        "set them in this environment's values to pin them "
        "(driftguard-cmp render --explain lists each with template:line)"
    )


def explain(switches: list[Finding], content_only: int = 0) -> list[str]:
    """``render --explain``: every finding with template:line, then what was not a finding and why."""
    found = findings(switches)
    lines = [
        f"implicit-defaults: {len({f.gate.key for f in found})} resource switch(es) rely on chart defaults"
    ]
    lines += [f"  {f.describe()}" for f in found]
    others = [f for f in switches if not f.is_finding]
    if others:
        lines.append("not findings:")
        for f in others:
            extra = f" ({f.why})" if f.verdict == DISABLED and f.why else ""
            lines.append(f"  {f.gate.key}: {f.where()} {f.quoted()}: {f.verdict}{extra}")
    if content_only:
        lines.append(f"  ({content_only} conditions only shape a resource's content: not switches)")
    return lines


def matches_required(key: str, required: list[str]) -> bool:
    """An ``explicit-keys`` entry names a key exactly, by its last segments, or by glob."""
    import fnmatch  # only when explicit-keys is set: ~2 ms of imports off every other render

    return any(key == r or key.endswith("." + r) or fnmatch.fnmatchcase(key, r) for r in required)


class ImplicitDefaultsGuard(GuardBase):
    name = "implicit-defaults"
    stage = RENDER

    def begin(self, ctx: GuardContext) -> None:
        """Read the templates and values while helm renders: only the final join needs its output."""
        if ctx.job.env.param("implicit-defaults") == "off" or ctx.renderer != "helm":
            return
        try:
            ctx.notes[NOTE + "-prepared"] = prepare(
                ctx.job.app_dir, supplied_values(ctx.job), cache_dir=ctx.job.settings.cache_dir
            )
        except InputError as exc:
            ctx.notes[NOTE + "-prepared"] = exc  # reported in check(), in the guards' order

    def check(self, ctx: GuardContext) -> list[str]:
        job = ctx.job
        mode = job.env.param("implicit-defaults")
        if mode == "off" or ctx.rendered is None or ctx.rendered.renderer != "helm":
            return []
        prep = ctx.notes.get(NOTE + "-prepared")
        if isinstance(prep, InputError):
            raise prep
        if not isinstance(prep, Prepared):
            prep = prepare(job.app_dir, supplied_values(job))
        switches = classify(prep, ctx.docs)
        ctx.notes[NOTE] = switches
        ctx.notes[NOTE + "-content-only"] = prep.scan.content_only
        found = findings(switches)
        required = [k for k in job.env.param("explicit-keys") if k]
        must = [f for f in found if matches_required(f.gate.key, required)] if required else []
        refused = found if mode == "refuse" else must
        if refused:
            why = "refuse mode" if mode == "refuse" else "listed in explicit-keys"
            keys = len({f.gate.key for f in refused})
            raise GuardRefusal(
                self.name,
                f"{keys} resource switch(es) rely on chart defaults this environment does not set ({why})",
                details=[f.describe() for f in refused],
                fix="set each key in this environment's values file (even to the chart's current default) to pin it",
                # a finding is a key this environment does not set: it relies on the chart default
                gating=list({f.gate.key: (f.gate.key, "chart-default", f.where()) for f in refused}.values()),
            )
        return [summary_line(found)] if found else []

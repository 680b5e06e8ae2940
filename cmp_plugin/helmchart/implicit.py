"""Implicit defaults, the analysis: resource switches an environment leaves to the chart default.

What the implicit-defaults guard (cmp_plugin/guards/implicit_defaults.py, whose docstring tells the
incident) and the PR check's removal causes (removal_cause.py, cmp_plugin/prcheck/envcause.py)
share: the chart prepared once (values, switches, subcharts), each switch classified by the scan
(``classify``: a *candidate* or the reason it is not one) and proved by flip renders
(``flips_of``, ``prove``, ``verdicts_of``), with the verdict strings the findings carry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cmp_plugin.helmchart import chart_values as cv
from cmp_plugin.helmchart.flip_proof import Flip, Proof, ProofRun, render_kept
from cmp_plugin.helmchart.switch_eval import evaluate
from cmp_plugin.helmchart.switches import ChartScan, Gate, gate_from_json, scan_chart
from cmp_plugin.helmchart.template_lexer import MAX_SOURCES, ROOT
from cmp_plugin.renderers.base import RenderJob
from cmp_plugin.renderers.helm import existing_values_files, set_values

if TYPE_CHECKING:
    from cmp_plugin.scan import Doc


FINDING = "finding"
CANDIDATE = "proposed by the template scan, not yet proven by a render"
SET = "set by this environment"
NO_DEFAULT = "the chart sets no default for it"
FALSY = "chart default is empty: no value to flip it to"
NOT_ON = "its condition is false with the chart default: nothing renders from it"
DISABLED = "in a subchart that does not render"
NOT_RENDERED = "its resources are not in this render"
NOT_DECIDING = "the condition holds without it: turning it off would not remove the resources"
REMOVES_NOTHING = "not proven: a render with it flipped removes no resource"
HOOKS_ONLY = "not proven: a render with it flipped removes only hooks, which Argo CD runs but does not keep"
NOT_PROVEN = "not proven"
PENDING = (
    "not proven yet: generate in warn mode spends about one render's time on proofs; the rest is proven "
    "in the background for the next render"
)
REPEATS = "not proven on its own: removing it takes the same resources as its key"


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
    """For DISABLED: the key that turned the subchart off; for REPEATS: that key; else a detail."""
    flip: Any = None
    """The value a proof render set the key to (None: the key removed)."""
    origin: str = ""
    """Where the chart default was found when not at the key itself (an ``_internal*`` root)."""

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
        """One line naming key, template:line, the gate as written, what its flip removes and why it counts."""
        what = _resources(self.rendered or tuple(self.gate.resources))
        if self.explicit:
            origin = f"set by this environment to {_show(self.value)}"
        else:
            under = f" (under {self.origin})" if self.origin else ""
            origin = f"not set here, chart default {_show(self.default)}{under}"
        if self.is_finding:
            flip = "removed" if self.flip is None else f"set to {_show(self.flip)}"
            return (
                f"{self.gate.key}: {self.where()} {self.quoted()} decides {what}; {origin}; "
                f"proven: a render with it {flip} removes {len(self.rendered)}"
            )
        return f"{self.gate.key}: {self.where()} {self.quoted()} decides {what}; {origin}"


def _resources(items: tuple[str, ...], shown: int = 3) -> str:
    if not items:
        return "resources"
    return ", ".join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")


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


def internal_roots(values: dict[str, Any]) -> list[str]:
    """Top-level ``_internal*`` maps: defaults a chart's own templates merge under ``.Values``
    (Istio's ``_internal_defaults_do_not_set``, merged by its ``zzz_profile.yaml``)."""
    return [k for k, v in values.items() if k.startswith("_internal") and isinstance(v, dict)]


def chart_default(prep: Prepared, key: str) -> tuple[bool, Any, str]:
    """(found, value, root) of a key's chart default; ``root`` names an ``_internal*`` root it sits under."""
    found, value = cv.lookup(prep.defaults, key)
    if found:
        return True, value, ""
    for root in internal_roots(prep.defaults):
        found, value = cv.lookup(prep.defaults[root], key)
        if found:
            return True, value, root
    return False, None, ""


def flip_of(default: Any) -> tuple[bool, Any]:
    """(flippable, value): off for a truthy default (a map is removed), on for a false boolean."""
    if isinstance(default, bool):
        return True, not default
    if isinstance(default, dict):
        return (True, None) if default else (False, None)
    if isinstance(default, (int, float)):
        return (True, 0) if default else (False, None)
    if isinstance(default, str):
        return (True, "") if default else (False, None)
    if isinstance(default, list):
        return (True, []) if default else (False, None)
    return False, None


def eval_view(prep: Prepared) -> dict[str, Any]:
    """The effective values as the templates read them: ``_internal*`` defaults under the rest."""
    view = prep.effective
    for root in internal_roots(prep.defaults):
        view = cv.merge_values(prep.defaults[root], view)
    return view


def classify(prep: Prepared, docs: Iterable[Doc] | None) -> list[Finding]:
    """Every gate with what the template scan says of it: CANDIDATE keys still need a proof
    (:func:`prove`); ``docs`` (the render) rules out keys whose templates printed nothing."""
    rendered: dict[str, int] = {}
    if docs is not None:
        for d in docs:
            rel = d.source.split("/", 1)[1] if "/" in d.source else d.source
            rendered[rel] = rendered.get(rel, 0) + 1
    view = eval_view(prep)
    out: list[Finding] = []
    for gate in all_gates(prep):
        explicit = any(cv.lookup(doc, gate.key)[0] for doc in prep.supplied) or any(
            cv.lookup(doc, f"{root}.{gate.key}")[0]
            for doc in prep.supplied
            for root in internal_roots(prep.defaults)
        )
        found, default, root = chart_default(prep, gate.key)
        _, value = cv.lookup(view, gate.key)
        flippable, flip = flip_of(default)
        renders: bool | None = None
        if docs is not None and len(gate.sources) < MAX_SOURCES:
            renders = any(
                n
                for rel, n in rendered.items()
                for src in gate.sources
                if rel == src or rel.startswith(src + "/")
            )
        off = _disabled_by(gate, prep)
        if off is not None:
            verdict = DISABLED
        elif explicit:
            verdict = SET
        elif not found:
            verdict = NO_DEFAULT
        elif not flippable:
            verdict = FALSY
        elif evaluate(gate, view, lookup=cv.lookup) is False:
            verdict = NOT_ON
        elif renders is False:
            verdict = NOT_RENDERED
        elif evaluate(gate, view, lookup=cv.lookup, flip=(gate.key, flip)) is True:
            verdict = NOT_DECIDING
        else:
            verdict = CANDIDATE
        out.append(Finding(gate, explicit, default, value, renders, verdict, (), off or "", flip, root))
    return out


def flips_of(
    switches: list[Finding], prep: Prepared | None = None, chart_dir: Path | None = None
) -> list[Flip]:
    """One flip per CANDIDATE key, with the templates that may hold what it decides (the proof's hint
    for crediting a change to one key of a render): those of its gates and, with ``chart_dir``,
    every output template of its chart that reads the key by name."""
    keys: dict[str, Flip] = {}
    for f in switches:
        if f.verdict != CANDIDATE:
            continue
        old = keys.get(f.gate.key)
        hint = tuple(dict.fromkeys((*(old.templates if old else ()), *f.gate.sources)))
        keys[f.gate.key] = Flip(f.gate.key, f.flip, hint)
    if prep is not None and chart_dir is not None and keys:
        reads = _values_read(chart_dir, prep)
        scopes = {f.gate.key: f.gate.scope for f in switches if f.gate.key in keys}
        for key, flip in keys.items():
            scope = "" if key.startswith("global.") else scopes.get(key, "")
            rel = key[len(scope) :] if scope and key.startswith(scope) else key
            extra = [
                src
                for src, (where, paths) in reads.items()
                if rel in paths and (where == scope or key.startswith("global."))
            ]
            if extra:
                keys[key] = flip._replace(templates=tuple(dict.fromkeys((*flip.templates, *extra))))
    return list(keys.values())


_READS = re.compile(r"Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


_READ_MEMO: list[tuple[Path, ChartScan, dict[str, tuple[str, set[str]]]]] = []
"""The last chart's answer: ``begin`` and ``check`` of one render both ask (every template read)."""


def _values_read(chart_dir: Path, prep: Prepared) -> dict[str, tuple[str, set[str]]]:
    """Rendered source path -> (values scope, every values path it names and their prefixes)."""
    for path, scan, memo in _READ_MEMO:
        if path == chart_dir and scan is prep.scan:
            return memo
    out: dict[str, tuple[str, set[str]]] = {}
    for src, (scope, text) in _output_templates(chart_dir, prep).items():
        paths: set[str] = set()
        for m in _READS.finditer(text):
            parts = m.group(1)[1:].split(".")
            paths.update(".".join(parts[: i + 1]) for i in range(len(parts)))
        out[src] = (scope, paths)
    _READ_MEMO[:] = [(chart_dir, prep.scan, out)]
    return out


def _output_templates(chart_dir: Path, prep: Prepared) -> dict[str, tuple[str, str]]:
    """Rendered source path -> (values scope, text) of every output template of the chart and its subcharts."""
    out: dict[str, tuple[str, str]] = {}
    charts = [("", "", "")] + [(d.sub.path, d.sub.source, d.sub.scope) for d in prep.deps]
    for path, source, scope in charts:
        tdir = chart_dir / path / "templates" if path else chart_dir / "templates"
        if not tdir.is_dir():
            continue
        for file in sorted(tdir.rglob("*")):
            if not file.is_file() or file.name.startswith("_") or file.name == "NOTES.txt":
                continue
            rel = file.relative_to(tdir).as_posix()
            try:
                out[f"{source}/templates/{rel}" if source else f"templates/{rel}"] = (
                    scope,
                    file.read_text(errors="replace"),
                )
            except OSError:
                continue
    return out


def prove(
    job: RenderJob,
    switches: list[Finding],
    text: str,
    docs: list[Doc] | None = None,
    run: ProofRun | None = None,
    prep: Prepared | None = None,
    budget: float | None = None,
) -> tuple[list[Finding], int]:
    """The CANDIDATE keys proven by helm renders of ``job`` with them flipped (cmp_plugin.helmchart.flip_proof):
    FINDING with exactly the kept resources a flip removes, or why not; and the renders run.
    ``run``: a proof started earlier (``begin``) over a superset of these candidates."""
    flips = flips_of(switches, prep, job.app_dir if prep is not None else None)
    if not flips:
        return switches, 0
    if run is None:
        run = ProofRun(job, flips)
        run.start()
    try:
        proof = run.finish(render_kept(job, text, docs), budget=budget)
    finally:
        run.cancel()
    return verdicts_of(switches, proof, {f.key: f for f in flips}), proof.renders


def verdicts_of(switches: list[Finding], proof: Proof, flips: dict[str, Flip]) -> list[Finding]:
    """Each CANDIDATE turned into FINDING (with what its flip removes) or the reason it is not one."""
    removed: dict[str, tuple[str, ...]] = {}
    hooks: dict[str, int] = {}
    for key, items in proof.changed.items():
        removed[key] = tuple(sorted(f"{r.key.kind} {r.key.name}" for r in items if r.kept))
        hooks[key] = sum(1 for r in items if not r.kept)
    repeats: dict[str, str] = {}
    for key, res in removed.items():  # a whole map whose removal only repeats one of its own keys
        if res and key in flips and flips[key].value is None:
            for other, theirs in removed.items():
                if other.startswith(key + ".") and set(res) <= set(theirs):
                    repeats[key] = other
                    break
    out: list[Finding] = []
    for f in switches:
        key = f.gate.key
        if f.verdict != CANDIDATE:
            out.append(f)
        elif key in proof.pending:
            out.append(f._replace(verdict=PENDING))
        elif key in repeats:
            out.append(f._replace(verdict=REPEATS, rendered=removed[key], why=repeats[key]))
        elif removed.get(key):
            out.append(f._replace(verdict=FINDING, rendered=removed[key]))
        elif hooks.get(key):
            out.append(f._replace(verdict=HOOKS_ONLY, why=f"{hooks[key]} hook(s)"))
        elif key in proof.failed:
            out.append(f._replace(verdict=NOT_PROVEN, why=proof.failed[key]))
        else:
            out.append(f._replace(verdict=REMOVES_NOTHING))
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


def analyse(job: RenderJob, docs: Iterable[Doc] | None = None, text: str | None = None) -> list[Finding]:
    """Every gating key of the chart at ``job.app_dir`` for the values this environment supplies;
    with the render's ``text``, the candidates are proven (or not) by renders with them flipped."""
    prep = prepare(job.app_dir, supplied_values(job), cache_dir=job.settings.cache_dir)
    switches = classify(prep, docs)
    return prove(job, switches, text, prep=prep)[0] if text is not None else switches


def findings(switches: Iterable[Finding]) -> list[Finding]:
    return [f for f in switches if f.is_finding]


def by_key(found: Iterable[Finding]) -> dict[str, list[Finding]]:
    """Findings grouped by key, in the order of their first gate."""
    keys: dict[str, list[Finding]] = {}
    for f in found:
        keys.setdefault(f.gate.key, []).append(f)
    return keys


NOTE = "implicit-defaults"
"""The key in ``GuardContext.notes`` under which the guard leaves its findings (shrink, the
pipeline and the background proof read them)."""

VERDICTS_VERSION = "implicit-defaults-verdicts-1"


def dump_switches(switches: list[Finding]) -> dict[str, Any]:
    """The guard's verdicts as JSON, for the content cache."""
    return {"switches": [[list(f.gate), *list(f)[1:]] for f in switches]}


def load_switches(raw: Any) -> list[Finding] | None:
    """Verdicts read back from the content cache (None when absent or unreadable)."""
    try:
        out = []
        for row in raw["switches"]:
            gate = gate_from_json(row[0])
            out.append(
                Finding(gate, row[1], row[2], row[3], row[4], row[5], tuple(row[6]), row[7], row[8], row[9])
            )
        return out
    except (TypeError, KeyError, ValueError, IndexError):
        return None

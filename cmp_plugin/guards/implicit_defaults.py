"""implicit-defaults: resource switches that this environment leaves to the chart default.

The incident: production relied on the chart's ``enabled`` default; the default flipped, production
rendered nothing for that service and Argo CD pruned it. A *finding* is a values key
- whose chart default makes at least one whole resource that Argo CD keeps render here (hooks are
  not kept: cmp_plugin.kept),
- that this environment does not set (values files, inline values, helm set parameters), and
- whose flip removes that resource: off for a truthy default (false, 0, "", [], or the map
  removed), on for a false default (``not`` / ``unless``-style conditions).
Defaults are read wherever the chart keeps them: values.yaml, subcharts' defaults (with
``condition``, ``tags``, ``import-values``) and ``_internal*`` roots that the chart's own templates
merge under ``.Values`` (Istio's ``_internal_defaults_do_not_set``).

The template scan *proposes* (cmp_plugin.helmchart: switches, switch_eval, chart_values: which keys
could decide whole documents); helm *proves* (cmp_plugin.helmchart.flip_proof: a render with the
key flipped shows the resource gone); the analysis itself is cmp_plugin/helmchart/implicit.py. Only proven keys are findings, each with exactly the resources its flip removes;
every other key the scan saw is kept with its reason for ``render --explain``. In warn mode the
guard prints one line per render; refuse and explicit-keys refuse with one line per key, naming
template:line.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from cmp_plugin.content_cache import cache_get, cache_put
from cmp_plugin.guards.base import RENDER, GuardBase, GuardContext
from cmp_plugin.helmchart.flip_proof import PARALLEL, ProofRun, content_digest, render_kept
from cmp_plugin.helmchart.implicit import (
    DISABLED,
    FALSY,
    NO_DEFAULT,
    NOT_DECIDING,
    NOT_ON,
    NOT_RENDERED,
    NOTE,
    PENDING,
    REPEATS,
    SET,
    VERDICTS_VERSION,
    Finding,
    Prepared,
    by_key,
    classify,
    dump_switches,
    findings,
    flips_of,
    load_switches,
    prepare,
    prove,
    supplied_values,
)
from driftguard.errors import GuardRefusal, InputError

if TYPE_CHECKING:
    pass

__all__ = ["NOTE", "ImplicitDefaultsGuard", "explain", "summary_line"]

SHOWN_KEYS = 4
MIN_BUDGET = 0.05
"""Seconds warn mode gives the proof at least, however fast helm's own render was."""


def summary_line(found: list[Finding], pending: int = 0) -> str:
    """The one warn-mode line: how many switches rely on chart defaults, the first few named."""
    named = []
    keys = {key: fs[0].rendered for key, fs in by_key(found).items()}
    # the switches that decide the most resources first (a stable sort keeps template order on ties)
    for key, res in sorted(keys.items(), key=lambda kv: -len(kv[1]))[:SHOWN_KEYS]:
        what = res[0] if res else "resources"
        if len(res) > 1:
            what += f" and {len(res) - 1} more"
        named.append(f"{key} ({what})")
    more = ", ... " if len(keys) > SHOWN_KEYS else ""
    later = f" ({pending} more being proven)" if pending else ""
    return (
        f"driftguard: note: {len(keys)} resource switches rely on chart defaults{later}: {', '.join(named)}{more}; "
        "set them in this environment's values to pin them "
        "(driftguard-cmp render --explain lists each with template:line)"
    )


def explain(switches: list[Finding], content_only: int = 0) -> list[str]:
    """``render --explain``: every proven finding with template:line and what its flip removes, then
    the candidates a render did not prove and what the scan saw otherwise, each with why."""
    found = by_key(findings(switches))
    lines = [
        f"implicit-defaults: {len(found)} resource switch(es) rely on chart defaults (each proven by a render)"
    ]
    for fs in found.values():
        first = fs[0]
        lines.append(f"  {first.describe()}")
        if len(fs) > 1:
            lines.append(
                f"    also gated at {', '.join(f.where() for f in fs[1:6])}" + (" ..." if len(fs) > 6 else "")
            )
        if len(first.rendered) > 3:
            lines.append(f"    removes: {', '.join(first.rendered)}")
    proven = set(found)
    unproven = [
        f
        for f in switches
        if not f.is_finding and f.verdict not in SCAN_VERDICTS and f.gate.key not in proven
    ]
    if unproven:
        lines.append("candidates not proven:")
        for key, fs in by_key(unproven).items():
            f = fs[0]
            why = f.verdict + (f" ({f.why})" if f.why else "")
            if f.verdict == REPEATS:
                why = f"{REPEATS} `{f.why}`"
            lines.append(f"  {key}: {f.where()} {f.quoted()}: {why}")
    others = [f for f in switches if f.verdict in SCAN_VERDICTS and f.gate.key not in proven]
    if others:
        lines.append("not findings:")
        for f in others:
            extra = f" ({f.why})" if f.verdict == DISABLED and f.why else ""
            lines.append(f"  {f.gate.key}: {f.where()} {f.quoted()}: {f.verdict}{extra}")
    if content_only:
        lines.append(f"  ({content_only} conditions only shape a resource's content: not switches)")
    return lines


SCAN_VERDICTS = frozenset({SET, NO_DEFAULT, FALSY, NOT_ON, DISABLED, NOT_RENDERED, NOT_DECIDING})
"""What the template scan decides alone, without a render."""


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
            prep = prepare(ctx.job.app_dir, supplied_values(ctx.job), cache_dir=ctx.job.settings.cache_dir)
        except InputError as exc:
            ctx.notes[NOTE + "-prepared"] = exc  # reported in check(), in the guards' order
            return
        ctx.notes[NOTE + "-prepared"] = prep
        ctx.notes[NOTE + "-began"] = time.monotonic()
        digest = content_digest(ctx.job, VERDICTS_VERSION)
        if digest is not None:
            ctx.notes[NOTE + "-digest"] = digest
            cached = load_switches(cache_get(ctx.job.settings.cache_dir, f"verdicts-{digest}"))
            if cached is not None:  # this content was proven before: nothing to scan or render
                ctx.notes[NOTE + "-cached"] = cached
                return
        # the first proof renders run beside helm's own render
        run = ProofRun(ctx.job, flips_of(classify(prep, None), prep, ctx.job.app_dir))
        ctx.cleanups.append(run.cancel)
        run.start(1 if ctx.hot else PARALLEL)  # beside helm's own render: one more process, not two
        ctx.notes[NOTE + "-proof"] = run

    def check(self, ctx: GuardContext) -> list[str]:
        job = ctx.job
        mode = job.env.param("implicit-defaults")
        if mode == "off" or ctx.rendered is None or ctx.rendered.renderer != "helm":
            return []
        prep = ctx.notes.get(NOTE + "-prepared")
        if isinstance(prep, InputError):
            raise prep
        if not isinstance(prep, Prepared):
            prep = prepare(job.app_dir, supplied_values(job), cache_dir=job.settings.cache_dir)
        cached = ctx.notes.get(NOTE + "-cached")
        if isinstance(cached, list):
            return self._report(ctx, cached, 0, prep)
        switches = classify(prep, ctx.docs)
        text = ctx.rendered.text
        run = ctx.notes.get(NOTE + "-proof")
        required = [k for k in job.env.param("explicit-keys") if k]
        budget = None  # refuse mode and explicit-keys decide on every candidate: the whole proof
        began = ctx.notes.get(NOTE + "-began")
        if ctx.hot and mode == "warn" and not required and isinstance(began, float):
            # warn mode: at most about one more render's time (helm's own render took this long)
            budget = max(MIN_BUDGET, time.monotonic() - began)
        classified = switches
        switches, renders = prove(
            job,
            switches,
            text,
            ctx.docs,
            run=run if isinstance(run, ProofRun) else None,
            prep=prep,
            budget=budget,
        )
        digest = ctx.notes.get(NOTE + "-digest")
        if isinstance(digest, str) and all(f.verdict != PENDING for f in switches):
            cache_put(job.settings.cache_dir, f"verdicts-{digest}", dump_switches(switches))
        elif isinstance(digest, str) and budget is not None:
            # the rest of the proof goes on once generate has answered (cmp_plugin/proof_background.py)
            from cmp_plugin.proof_background import Later

            ctx.notes[NOTE + "-background"] = Later(
                job,
                flips_of(classified, prep, job.app_dir),
                render_kept(job, text, ctx.docs),
                classified,
                digest,
            )
        return self._report(ctx, switches, renders, prep)

    def _report(self, ctx: GuardContext, switches: list[Finding], renders: int, prep: Prepared) -> list[str]:
        job = ctx.job
        mode = job.env.param("implicit-defaults")
        required = [k for k in job.env.param("explicit-keys") if k]
        ctx.notes[NOTE] = switches
        ctx.notes[NOTE + "-renders"] = renders
        ctx.notes[NOTE + "-content-only"] = prep.scan.content_only
        found = findings(switches)
        must = [f for f in found if matches_required(f.gate.key, required)] if required else []
        refused = found if mode == "refuse" else must
        if refused:
            why = "refuse mode" if mode == "refuse" else "listed in explicit-keys"
            keys = len({f.gate.key for f in refused})
            raise GuardRefusal(
                self.name,
                f"{keys} resource switch(es) rely on chart defaults this environment does not set ({why})",
                details=[fs[0].describe() for fs in by_key(refused).values()],
                fix="set each key in this environment's values file (even to the chart's current default) to pin it",
                # a finding is a key this environment does not set: it relies on the chart default
                gating=list({f.gate.key: (f.gate.key, "chart-default", f.where()) for f in refused}.values()),
            )
        pending = len({f.gate.key for f in switches if f.verdict == PENDING})
        if found:
            return [summary_line(found, pending)]
        if pending:
            return [
                f"driftguard: note: {pending} possible resource switch(es) relying on chart defaults are being "
                "proven by renders; the next render of this revision reports them"
            ]
        return []

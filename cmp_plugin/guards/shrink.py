"""shrink: refuse a render that would make Argo CD prune a large share, or any protected kind.

Compared with what the Application manages now (cmp_plugin.baseline). The approval annotation
``driftguard.io/approve-prune: <revision>`` on the Application lets exactly that revision through.
"""

from __future__ import annotations

import threading
from typing import Any

from cmp_plugin import baseline
from cmp_plugin.guards.base import RENDER, GuardBase, GuardContext
from driftguard.errors import GuardRefusal, InputError
from driftguard.manifests import ResourceKey

__all__ = ["ShrinkGuard"]

SHOWN = 20


class ShrinkGuard(GuardBase):
    name = "shrink"
    stage = RENDER

    def begin(self, ctx: GuardContext) -> None:
        """Fetch the baseline while the renderer runs (reading the cluster costs a client import and a round trip)."""
        lookup = _Lookup(ctx)
        lookup.start()
        ctx.notes["baseline-lookup"] = lookup

    def check(self, ctx: GuardContext) -> list[str]:
        job = ctx.job
        lookup = ctx.notes.get("baseline-lookup")
        if isinstance(lookup, _Lookup):
            base, notes = lookup.outcome()
        else:
            base, notes = baseline.fetch(job.env, job.settings)
        if base is None:
            if job.settings.baseline_required:
                raise GuardRefusal(
                    self.name,
                    "no baseline to compare the render with, and DRIFTGUARD_CMP_BASELINE_REQUIRED is true",
                    details=notes,
                    fix="give the sidecar read access to Applications (manifests/base/cmp) or set DRIFTGUARD_ARGOCD_URL/_TOKEN",
                )
            return [f"driftguard: warning: shrink guard skipped: {n}" for n in notes]
        rendered = set(ctx.kept)  # what Argo CD keeps, not what the render prints (cmp_plugin/target.py)
        removed = sorted(k for k in base.keys if k not in rendered)
        if not removed:
            return []
        protected = set(job.env.param("protected-kinds"))
        hits = [k for k in removed if k.kind in protected]
        ratio = len(removed) / len(base.keys)
        max_ratio = float(job.env.param("max-prune-ratio"))
        max_count = int(job.env.param("max-prune-count"))
        reasons = []
        if hits:
            reasons.append(f"{len(hits)} of a protected kind ({', '.join(sorted({k.kind for k in hits}))})")
        if len(removed) > max_count:
            reasons.append(f"{len(removed)} > max-prune-count {max_count}")
        if ratio > max_ratio:
            reasons.append(f"{ratio:.0%} of {len(base.keys)} > max-prune-ratio {max_ratio:.0%}")
        if not reasons:
            return [
                f"driftguard: note: this render drops {len(removed)} of {len(base.keys)} resources (within limits)"
            ]
        if base.approval and job.env.revision and base.approval == job.env.revision:
            return [
                f"driftguard: warning: {len(removed)} removals approved for revision {job.env.revision[:12]} by {baseline.APPROVE_ANNOTATION}"
            ]
        explained, gating = _explain(ctx, removed)
        details = [
            f"{k}{explained.get(k, '')}" for k in (hits + [k for k in removed if k not in hits])[:SHOWN]
        ]
        if len(removed) > SHOWN:
            details.append(f"... and {len(removed) - SHOWN} more")
        details.append(f"baseline: {base.source}")
        if base.approval:
            details.append(
                f"the approval on the Application is for revision {base.approval[:12]}, not {job.env.revision[:12] or 'this one'}"
            )
        return _refuse(
            self.name, len(removed), len(base.keys), "; ".join(reasons), details, job.env.revision, gating
        )


def _refuse(
    name: str,
    count: int,
    total: int,
    why: str,
    details: list[str],
    revision: str,
    gating: list[tuple[str, str, str]],
) -> list[str]:
    raise GuardRefusal(
        name,
        f"the render would prune {count} of {total} resources the Application manages ({why})",
        details=details,
        fix=f"if this is intended, annotate the Application: {baseline.APPROVE_ANNOTATION}={revision or '<revision>'} (approves exactly this revision)",
        gating=gating,
    )


def _explain(
    ctx: GuardContext, removed: list[ResourceKey]
) -> tuple[dict[ResourceKey, str], list[tuple[str, str, str]]]:
    """For each removal, ``  <- hidden by the chart default of KEY (template:line)`` when a render
    with that key flipped brings it back (cmp_plugin.helmchart.removal_cause, the PR diff's proof too), else
    that the cause is not known; and the proven keys as (key, origin, template:line)."""
    if ctx.rendered is None or ctx.rendered.renderer != "helm":
        return {}, []  # no values keys: nothing to name
    unknown = {k: f"  <- {UNKNOWN_SHORT}" for k in removed}
    from cmp_plugin.guards.implicit_defaults import NOTE
    from cmp_plugin.helmchart import implicit, removal_cause
    from cmp_plugin.helmchart.flip_proof import render_kept

    job = ctx.job
    prep = ctx.notes.get(NOTE + "-prepared")
    switches = ctx.notes.get(NOTE)
    try:
        if not isinstance(prep, implicit.Prepared):
            prep = implicit.prepare(
                job.app_dir, implicit.supplied_values(job), cache_dir=job.settings.cache_dir
            )
        if not isinstance(switches, list):
            switches = implicit.classify(prep, ctx.docs)
        candidates = removal_cause.hidden_flips(prep, switches)
        proven = removal_cause.causes(job, removed, candidates, render_kept(job, ctx.rendered.text, ctx.docs))
    except InputError:
        return unknown, []
    out = dict(unknown)
    gating: dict[str, tuple[str, str, str]] = {}
    for key in removed:
        if key in proven:
            cause = removal_cause.cause_of(*proven[key])
            out[key] = f"  <- {cause.hidden()}"
            gating.setdefault(cause.key, (cause.key, cause.origin, cause.where))
    return out, list(gating.values())


UNKNOWN_SHORT = "which values key decided it: not known"


class _Lookup(threading.Thread):
    """baseline.fetch in a daemon thread (a plain thread: concurrent.futures costs ~8 ms to import)."""

    def __init__(self, ctx: GuardContext) -> None:
        super().__init__(name="driftguard-baseline", daemon=True)
        self.env, self.settings = ctx.job.env, ctx.job.settings
        self.result: tuple[Any, list[str]] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = baseline.fetch(self.env, self.settings)
        except BaseException as exc:  # handed to the render's thread by outcome()
            self.error = exc

    def outcome(self) -> tuple[baseline.Baseline | None, list[str]]:
        """What fetch returned, or what it raised; no answer in time counts as no baseline."""
        # each source has its own socket timeout; this bounds a server that trickles bytes
        deadline = 2 * self.settings.baseline_timeout + 1
        self.join(deadline)
        if self.is_alive():  # a daemon thread: abandoned, and gone when the render exits
            return None, [f"no baseline source answered within {deadline:g} s"]
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

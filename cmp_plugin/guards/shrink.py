"""shrink: refuse a render that would make Argo CD prune a large share, or any protected kind.

Compared with what the Application manages now (cmp_plugin.baseline). The approval annotation
``driftguard.io/approve-prune: <revision>`` on the Application lets exactly that revision through.
"""

from __future__ import annotations

import threading
from typing import Any

from cmp_plugin import baseline
from cmp_plugin.guards.base import RENDER, GuardBase, GuardContext
from cmp_plugin.guards.implicit_defaults import NOTE, Finding
from driftguard.errors import GuardRefusal
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
        findings = ctx.notes.get(NOTE)
        explained, gating = _explain(removed, findings if isinstance(findings, list) else [])
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
    removed: list[ResourceKey], findings: list[Finding]
) -> tuple[dict[ResourceKey, str], list[tuple[str, str, str]]]:
    """`` (hidden by the chart default of enabled)`` for removals that a hidden gate explains, and
    those gates as (key, origin, template:line) in the order they explain removals."""
    out: dict[ResourceKey, str] = {}
    gating: dict[str, tuple[str, str, str]] = {}
    hidden = [f for f in findings if f.renders is False]
    for key in removed:
        for f in hidden:
            kinds = {r.split(" ", 1)[0] for r in f.gate.resources}
            if key.kind in kinds or not kinds:
                origin = "the chart default" if not f.explicit else "this environment's value"
                out[key] = f"  <- hidden by {origin} of {f.gate.key} ({f.gate.file}:{f.gate.line})"
                gating.setdefault(
                    f.gate.key, (f.gate.key, "value" if f.explicit else "chart-default", f.where())
                )
                break
    return out, list(gating.values())


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

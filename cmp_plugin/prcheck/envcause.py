"""Why a resource disappeared between two renders of one environment: the PR diff's side of
cmp_plugin.helmchart.removal_cause (the shrink guard uses the same proof).

A gating key whose value differs between base and head is a candidate; head is rendered again
with candidates set back to their base values, and the key whose flip brings the resource back is
named. When none does, the cause is not known and the diff says so.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from cmp_plugin.helmchart import removal_cause
from cmp_plugin.helmchart.flip_proof import render_kept
from cmp_plugin.helmchart.implicit import Prepared, classify, prepare, supplied_values
from cmp_plugin.renderers.base import RenderJob

if TYPE_CHECKING:
    from cmp_plugin.scan import Doc
    from driftguard.manifests import ResourceKey

__all__ = ["UNKNOWN", "Probe", "probe", "removal_causes"]

UNKNOWN = "cause not known: setting back no values key that changed brings it back"


class Probe(NamedTuple):
    """One helm render of an environment at one revision, with what its proof renders need."""

    job: RenderJob
    prep: Prepared
    text: str
    docs: list[Doc]


def probe(job: RenderJob, text: str, docs: list[Doc]) -> Probe:
    """The chart's gates and values for ``job`` (read before the revision's checkout goes away)."""
    prep = prepare(job.app_dir, supplied_values(job), cache_dir=job.settings.cache_dir)
    return Probe(job, prep, text, docs)


def removal_causes(base: Probe, head: Probe, removed: list[ResourceKey]) -> dict[ResourceKey, str]:
    """For each resource rendered at base and not at head, the proven cause in words (or nothing)."""
    switches = classify(head.prep, head.docs)
    candidates = removal_cause.changed_flips(base.prep, head.prep, switches)
    if not candidates or not removed:
        return {}
    now = {flip.key: after for flip, _, after in candidates}
    with tempfile.TemporaryDirectory(prefix="driftguard-cause-") as scratch:
        job = head.job._replace(scratch=Path(scratch), early=None)
        proven = removal_cause.causes(
            job,
            removed,
            [(flip, f) for flip, f, _ in candidates],
            render_kept(job, head.text, head.docs),
        )
    return {
        key: removal_cause.cause_of(flip, f, before=flip.value, after=now[flip.key]).changed()
        for key, (flip, f) in proven.items()
    }

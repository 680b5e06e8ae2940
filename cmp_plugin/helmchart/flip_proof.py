"""Proof by render: which values keys, flipped, make which resources go (or come back).

The template scan (cmp_plugin.helmchart.switches) only *proposes* keys; a key is reported once helm, run with
the key flipped in an extra values file, shows the resource gone (implicit-defaults) or back (the
cause of a removal: the shrink guard and the PR diff). Several keys are flipped in one render and
split only when needed:

- the first render flips every candidate at once (only keys where one nests in the other, which
  one values document cannot hold together, wait for a second render), so a cold proof costs
  about one helm render, run beside the main render where the caller starts it early;
- a resource that changed is credited to the one key of its render whose templates hold it
  (``# Source:``, the scan's hint); the keys that share a changed resource's template are the
  ambiguous remainder, rendered again in groups whose templates do not overlap (a greedy
  colouring); a change no key's templates hold, a resource that moved to another template, or a
  render that fails splits the group in halves, down to single keys;
- a single key's render is the proof itself: what changed, changed because of it.

What a proof found is kept in the sidecar's cache under a digest of everything the renders read
(every file of the chart, the values files and parameters, the helm arguments, the flips), so a
refresh of the same revision renders nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cmp_plugin.content_cache import cache_get, cache_put
from cmp_plugin.helmchart.flip_cache import _digest, _dump, _load, content_digest
from cmp_plugin.helmchart.flip_groups import _colour, _covers, _halves, _layers, _suspects
from cmp_plugin.helmchart.flip_records import (
    BACK,
    GONE,
    MAX_RENDERS,
    PARALLEL,
    Flip,
    Proof,
    Resource,
)
from cmp_plugin.kept import kept_mask
from driftguard.errors import DriftguardError
from driftguard.manifests import ResourceKey

if TYPE_CHECKING:
    from cmp_plugin.process import ToolRun
    from cmp_plugin.renderers.base import RenderJob
    from cmp_plugin.scan import Doc

__all__ = [
    "BACK",
    "GONE",
    "PARALLEL",
    "Flip",
    "Proof",
    "ProofRun",
    "Resource",
    "content_digest",
    "prove",
    "render_kept",
]


def render_kept(job: RenderJob, text: str, docs: list[Doc] | None = None) -> dict[ResourceKey, Resource]:
    """Every document of a helm render by identity (the last of a duplicate wins, as in Argo CD)."""
    from cmp_plugin.scan import keys_of, scan_stream

    if docs is None:
        docs = scan_stream(text, source="helm")
    keys = keys_of(docs, default_namespace=job.env.namespace)
    mask = kept_mask(text, docs)
    out: dict[ResourceKey, Resource] = {}
    for d, k, kept in zip(docs, keys, mask, strict=True):
        rel = d.source.split("/", 1)[1] if "/" in d.source else d.source
        out[k] = Resource(k, rel, kept)
    return out


def prove(
    job: RenderJob,
    flips: list[Flip],
    *,
    base: dict[ResourceKey, Resource],
    want: str = GONE,
    targets: Iterable[ResourceKey] = (),
) -> Proof:
    """What each flip changes, proven by helm renders of ``job`` with the flips set (module doc)."""
    run = ProofRun(job, flips, want=want, targets=targets)
    try:
        run.start()
        return run.finish(base)
    finally:
        run.cancel()


class ProofRun:
    """A proof whose first renders may start before the base render is known (while helm renders
    it); ``finish`` collects them and renders the rest. ``cancel`` stops whatever still runs."""

    def __init__(
        self, job: RenderJob, flips: list[Flip], *, want: str = GONE, targets: Iterable[ResourceKey] = ()
    ) -> None:
        wanted = sorted(set(targets))
        self.job = job
        self.digest = _digest(job, flips, want, wanted) if flips else None
        self.hit: Proof | None = None if flips else Proof({}, {}, 0)
        self.prior = Proof({}, {}, 0)
        todo = flips
        if self.digest is not None:
            cached = _load(cache_get(job.settings.cache_dir, f"proof-{self.digest}"), flips)
            if cached is not None and not cached.pending:
                self.hit = cached
            elif cached is not None:  # settled in part by an earlier render: go on with the rest
                self.prior = cached
                todo = [f for f in flips if f.key in set(cached.pending)]
        self.solver = _Solver(job, todo, want, set(wanted))
        if self.prior.groups:  # the groups where the last render stopped, splits included
            by_key = {f.key: f for f in todo}
            self.solver.queue = [[by_key[k] for k in g if k in by_key] for g in self.prior.groups]
            self.solver.queue = [g for g in self.solver.queue if g]

    def start(self, at_most: int = PARALLEL) -> None:
        """Start the first renders (``at_most``), unless the cache has the answer."""
        if self.hit is None:
            self.solver.launch(at_most)

    def finish(self, base: dict[ResourceKey, Resource], *, budget: float | None = None) -> Proof:
        """Every flip settled, or with ``budget`` (seconds from now) those settled in that time."""
        if self.hit is not None:
            return self.hit
        new = self.solver.finish(base, budget=budget)
        proof = Proof(
            {**self.prior.changed, **new.changed},
            {**self.prior.failed, **new.failed},
            new.renders,
            new.pending,
            new.groups,
        )
        if self.digest is not None and not self.solver.unreliable:
            cache_put(self.job.settings.cache_dir, f"proof-{self.digest}", _dump(proof))
        self.hit = proof
        return proof

    def cancel(self) -> None:
        self.solver.cancel()


class _Solver:
    def __init__(self, job: RenderJob, flips: list[Flip], want: str, targets: set[ResourceKey]) -> None:
        self.job, self.want, self.targets = job, want, targets
        self.changed: dict[str, list[Resource]] = {f.key: [] for f in flips}
        self.failed: dict[str, str] = {}
        self.renders = 0
        self.unreliable = False
        """A render stopped for a reason other than the chart (a timeout): not cached."""
        self.queue = _layers(flips)
        self.running: list[tuple[list[Flip], ToolRun | str]] = []
        self.started: dict[int, float] = {}
        self.took: float | None = None
        """How long the last render this proof waited for took: under a budget, a render that
        cannot end before the budget's end is not started (it would be killed, its CPU taken from
        other renders), nor a second one before the first has ended."""

    def launch(self, at_most: int = PARALLEL, stop: float | None = None) -> None:
        import time

        while self.queue and len(self.running) < at_most:
            if stop is not None and (
                (self.took is None and self.running)  # how long one takes is known once one ends
                or (self.took is not None and time.monotonic() + self.took > stop)
            ):
                break
            if self.renders >= MAX_RENDERS:
                for batch in self.queue:
                    for f in batch:
                        self.failed[f.key] = f"not proven within the proof's {MAX_RENDERS} renders"
                self.queue = []
                break
            batch = self.queue.pop(0)
            run = self._start(batch)
            self.started[id(run)] = time.monotonic()
            self.running.append((batch, run))

    def finish(self, base: dict[ResourceKey, Resource], *, budget: float | None = None) -> Proof:
        import time

        stop = None if budget is None else time.monotonic() + budget
        settled = 0
        self.launch(stop=stop)
        while self.running:
            batch, run = self.running.pop(0)
            if stop is not None and settled and not isinstance(run, str):
                # the budget bounds the wait too, once this proof has moved on by one render
                run.deadline = min(run.deadline, stop)
            settled += 1
            self.queue += self._settle(batch, run, base, stop)
            began = self.started.pop(id(run), None)
            if began is not None and not isinstance(run, str):
                self.took = time.monotonic() - began
            if stop is not None and time.monotonic() >= stop:
                for left, other in self.running:  # over the budget: what still runs is left for later
                    if not isinstance(other, str):
                        other.kill()
                    self.queue.append(left)
                self.running = []
                break
            self.launch(stop=stop)
        pending = tuple(f.key for batch in self.queue for f in batch)
        groups = tuple(tuple(f.key for f in batch) for batch in self.queue)
        return Proof(
            {k: tuple(v) for k, v in self.changed.items() if v},
            dict(self.failed),
            self.renders,
            pending,
            groups,
        )

    def cancel(self) -> None:
        for _, run in self.running:
            if not isinstance(run, str):
                run.kill()
        self.running = []

    def _start(self, batch: list[Flip]) -> ToolRun | str:
        from cmp_plugin.process import ToolRun, tool_env
        from cmp_plugin.renderers.helm import helm_argv, values_files

        self.renders += 1
        doc: dict[str, Any] = {}
        for f in batch:
            _put(doc, f.key, f.value)
        path = self.job.scratch / f"flip-{self.renders}.json"
        try:
            path.write_text(json.dumps(doc))  # JSON is YAML: helm reads it as a values file
            argv = helm_argv(
                self.job.settings.helm_path(), self.job, values_files=[*values_files(self.job), path]
            )
            return ToolRun(
                argv,
                env=tool_env(self.job.scratch),
                timeout=self.job.settings.timeout,
                max_output=self.job.settings.max_output_bytes,
                name="helm template (flip proof)",
            )
        except (OSError, DriftguardError) as exc:
            self.unreliable = True
            return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

    def _settle(
        self,
        batch: list[Flip],
        run: ToolRun | str,
        base: dict[ResourceKey, Resource],
        stop: float | None = None,
    ) -> list[list[Flip]]:
        """Credit what one render changed; the groups still to render."""
        import time

        from driftguard.errors import RenderTimeout

        if isinstance(run, str):
            return self._fail(batch, run)
        try:
            text = run.wait()
            flipped = render_kept(self.job, text)
        except RenderTimeout as exc:
            if stop is not None and time.monotonic() >= stop:
                return [batch]  # stopped for the budget: still to prove
            self.unreliable = True
            return self._fail(batch, str(exc))
        except DriftguardError as exc:
            detail = (getattr(exc, "stderr", "") or "").strip().splitlines()
            said = [line for line in detail if line.startswith("Error:")] or detail[-1:]
            return self._fail(batch, said[0] if said else str(exc).splitlines()[0], "\n".join(detail))
        moved: list[tuple[Resource, Resource]] = []
        if self.want == GONE:
            changed = [r for k, r in base.items() if k not in flipped]
            moved = [
                (r, flipped[k]) for k, r in base.items() if k in flipped and flipped[k].template != r.template
            ]
        else:
            changed = [flipped[k] for k in self.targets if k in flipped]
        if len(batch) == 1:
            self.changed[batch[0].key] += changed
            return []
        credit: dict[str, list[Resource]] = {}
        unsettled: set[str] = set()
        for r in changed:
            owners = [f.key for f in batch if _covers(f.templates, r.template)]
            if not owners:
                return _halves(batch)  # no key's templates hold it: the scan cannot say which key did it
            if len(owners) > 1:
                unsettled.update(owners)  # the ambiguous remainder: rendered again without each other
            else:
                credit.setdefault(owners[0], []).append(r)
        for was, now in moved:  # one identity printed by another template: some flip moved it
            owners = [
                f.key
                for f in batch
                if _covers(f.templates, was.template) or _covers(f.templates, now.template)
            ]
            if not owners:
                return _halves(batch)
            if len(owners) > 1:
                unsettled.update(owners)
        for key, items in credit.items():
            if key not in unsettled:
                self.changed[key] += items
        rest = [f for f in batch if f.key in unsettled]
        if not rest:
            return []
        groups = _colour(rest)
        return _halves(batch) if len(groups) == 1 and len(rest) == len(batch) else groups

    def _fail(self, batch: list[Flip], why: str, said: str = "") -> list[list[Flip]]:
        if len(batch) > 1:
            suspects = _suspects(batch, said)
            if suspects and len(suspects) < len(batch):  # the rest renders together again
                return [[f for f in batch if f not in suspects], suspects]
            return _halves(batch)
        self.failed[batch[0].key] = f"the render with it flipped fails: {why[:200]}"
        return []


def _put(doc: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = doc
    for p in parts[:-1]:
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            nxt = node[p] = {}
        node = nxt
    node[parts[-1]] = value

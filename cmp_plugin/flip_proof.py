"""Proof by render: which values keys, flipped, make which resources go (or come back).

The template scan (cmp_plugin.gating) only *proposes* keys; a key is reported once helm, run with
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
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cmp_plugin.content_cache import cache_get, cache_put, hasher
from cmp_plugin.kept import kept_mask
from driftguard.errors import DriftguardError
from driftguard.manifests import ResourceKey

if TYPE_CHECKING:
    from cmp_plugin.process import ToolRun
    from cmp_plugin.renderers.base import RenderJob
    from cmp_plugin.scan import Doc

__all__ = ["BACK", "GONE", "Flip", "Proof", "ProofRun", "Resource", "content_digest", "prove", "render_kept"]

GONE = "gone"
"""Prove that a flip removes resources of the base render (implicit-defaults)."""
BACK = "back"
"""Prove that a flip brings back resources missing from the base render (the cause of a removal)."""

PARALLEL = 2
"""helm processes a proof runs at once (the sidecar's CPU is shared with the other renders)."""
MAX_RENDERS = 48
"""Renders one proof may run; keys left unproven past it are reported as such."""
MAX_CHART_BYTES = 64 << 20
_VERSION = "driftguard-flip-proof-1"


class Flip(NamedTuple):
    """One values key and the value a render sets it to (None: removed, as helm's null removes)."""

    key: str
    value: Any
    templates: tuple[str, ...] = ()
    """Template paths (relative to the top chart; a directory covers what is under it) that the
    key's gates decide: the scan's hint for crediting a changed resource to one key of a render."""


class Resource(NamedTuple):
    """A rendered document: its identity, template (relative to the top chart) and whether Argo CD keeps it."""

    key: ResourceKey
    template: str
    kept: bool


class Proof(NamedTuple):
    changed: dict[str, tuple[Resource, ...]]
    """Flip key -> the resources its flip removed (GONE) or brought back (BACK)."""
    failed: dict[str, str]
    """Flip key -> why no render could prove it (helm's error, the render budget)."""
    renders: int
    """helm renders run for this proof (0 when it came from the cache)."""
    pending: tuple[str, ...] = ()
    """Flip keys not settled within the time the caller gave (``finish(budget=...)``): the next
    proof of the same content goes on from here (the cache holds what is settled)."""
    groups: tuple[tuple[str, ...], ...] = ()
    """The pending keys as the groups still to render: a resumed proof keeps the splits made so far."""


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


_AT_VALUE: Any = None
_AT_FILE: Any = None


def _suspects(batch: list[Flip], said: str) -> list[Flip]:
    """The flips helm's error points at: the values path it could not evaluate (``executing
    "chart/charts/sub/templates/x.yaml" at <.Values.route.main>`` reads ``sub.route``) or the
    template that failed (``fail``: ``(chart/templates/x.yaml:7:4)``). Only a hint for regrouping:
    a flip is called failing only by a render of it alone."""
    global _AT_VALUE, _AT_FILE
    import re

    if _AT_VALUE is None:
        _AT_VALUE = re.compile(r'executing "([^"]+)" at <\$?\.Values((?:\.[A-Za-z0-9_-]+)+)')
        _AT_FILE = re.compile(r"[(\"]([^():\"\s]+/templates/[^():\"\s]+):\d+")
    paths = set()
    for m in _AT_VALUE.finditer(said):
        parts = m.group(1).split("/")[1:]  # the top chart's name first
        scope = "".join(f"{parts[i + 1]}." for i in range(len(parts) - 1) if parts[i] == "charts")
        paths.add(scope + m.group(2)[1:])
    files = {m.group(1).split("/", 1)[1] for m in _AT_FILE.finditer(said) if "/" in m.group(1)}
    return [
        f
        for f in batch
        if any(p == f.key or p.startswith(f.key + ".") for p in paths)
        or any(_covers(f.templates, x) for x in files)
    ]


def _halves(batch: list[Flip]) -> list[list[Flip]]:
    mid = len(batch) // 2
    return [batch[:mid], batch[mid:]]


def _covers(templates: tuple[str, ...], template: str) -> bool:
    return any(template == t or template.startswith(t.rstrip("/") + "/") for t in templates)


def _overlap(a: Flip, b: Flip) -> bool:
    if _nested(a, b):
        return True  # both in one values document: one would overwrite the other
    if not a.templates or not b.templates:
        return True
    return any(_covers(b.templates, t) for t in a.templates) or any(
        _covers(a.templates, t) for t in b.templates
    )


def _colour(flips: list[Flip]) -> list[list[Flip]]:
    """Groups of flips whose templates do not overlap (greedy, in the order given)."""
    groups: list[list[Flip]] = []
    for f in flips:
        for g in groups:
            if not any(_overlap(f, o) for o in g):
                g.append(f)
                break
        else:
            groups.append([f])
    return groups


def _layers(flips: list[Flip]) -> list[list[Flip]]:
    """Every flip in one render, except where one key nests in another (``a`` removed, ``a.enabled``
    set: one values document cannot hold both) or one key's templates hold all of another's (a
    subchart's ``condition`` and the keys inside it, ``notifications.enabled`` and
    ``notifications.serviceAccount.create``: with the outer key flipped the inner key's removals
    could not be told apart); the outer key goes to the next layer. Narrow keys are placed first;
    keys turned on and maps removed, likelier to break a render, have layers of their own."""
    layers: list[list[Flip]] = []
    # keys turned off first; keys turned on (``not`` defaults: what they enable may ``fail`` for
    # want of configuration) and maps removed (``nil pointer evaluating .main`` where a template
    # reads under one unguarded) in later layers: one failing flip fails its whole render
    for f in sorted(flips, key=lambda f: (_risk(f), len(f.templates))):
        for layer in layers:
            if _risk(layer[0]) != _risk(f):
                continue
            if not any(_nested(f, o) or _contains(f, o) or _contains(o, f) for o in layer):
                layer.append(f)
                break
        else:
            layers.append([f])
    return layers


def _risk(f: Flip) -> int:
    """0: a key turned off; 1: turned on or a map removed (flips that may break a render)."""
    return 1 if f.value is None or f.value is True else 0


def _contains(a: Flip, b: Flip) -> bool:
    """Whether ``a``'s templates hold every one of ``b``'s."""
    return bool(b.templates) and all(_covers(a.templates, t) for t in b.templates)


def _nested(a: Flip, b: Flip) -> bool:
    return a.key == b.key or a.key.startswith(b.key + ".") or b.key.startswith(a.key + ".")


def _put(doc: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = doc
    for p in parts[:-1]:
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            nxt = node[p] = {}
        node = nxt
    node[parts[-1]] = value


def chart_digest(chart_dir: Path) -> str | None:
    """A digest of every file under the chart (None when it is too large to be worth it)."""
    h = hasher(_VERSION.encode())
    total = 0
    for root, dirs, files in os.walk(chart_dir):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            path = Path(root, name)
            try:
                data = path.read_bytes()
            except OSError:
                continue
            total += len(data)
            if total > MAX_CHART_BYTES:
                return None
            # git stores any bytes as a name: hashed as the bytes they are
            h.update(
                f"\0{path.relative_to(chart_dir).as_posix()}\0{len(data)}\0".encode(errors="surrogateescape")
            )
            h.update(data)
    return str(h.hexdigest())


_BASES: dict[tuple[str, str, str], str | None] = {}
"""content_digest's part that does not depend on ``what``, per render: the guard's verdicts and its
proof ask for it in one render, and hashing every file of a large chart twice cost ~0.1 s."""


def content_digest(job: RenderJob, what: str) -> str | None:
    """A digest of everything a render of ``job`` reads (every chart file, the values files and
    parameters, helm's arguments, the helm binary) and of ``what`` is computed from it; None when
    the chart is too large or something cannot be read."""
    memo = (str(job.app_dir), str(job.scratch), repr(job.env))
    if memo not in _BASES:
        if len(_BASES) > 16:
            _BASES.clear()
        _BASES[memo] = _base_digest(job)
    base = _BASES[memo]
    if base is None:
        return None
    h = hasher(base.encode())
    h.update(b"\0" + what.encode())
    return str(h.hexdigest())


def _base_digest(job: RenderJob) -> str | None:
    from cmp_plugin.renderers.helm import helm_argv, values_files

    chart = chart_digest(job.app_dir)
    if chart is None:
        return None
    h = hasher(chart.encode())
    try:
        tool = Path(job.settings.helm_path()).stat()  # another helm may render another stream
        h.update(f"\0helm\0{tool.st_size}\0{tool.st_mtime_ns}\0{tool.st_ino}".encode())
        files = values_files(job)
        argv = helm_argv("helm", job, values_files=files)
        for f in files:
            h.update(b"\0values\0" + f.read_bytes())
    except (OSError, DriftguardError):
        return None
    # paths differ between renders (scratch, checkout): the files' contents are hashed instead
    for a in argv:
        h.update(b"\0" + (b"<path>" if a.startswith("/") else a.encode()))
    return str(h.hexdigest())


def _digest(job: RenderJob, flips: list[Flip], want: str, targets: list[ResourceKey]) -> str | None:
    what = json.dumps([want, [list(f) for f in flips], [list(t) for t in targets]], default=str)
    return content_digest(job, what)


def _dump(proof: Proof) -> dict[str, Any]:
    return {
        "changed": {k: [[list(r.key), r.template, r.kept] for r in v] for k, v in proof.changed.items()},
        "failed": proof.failed,
        "pending": list(proof.pending),
        "groups": [list(g) for g in proof.groups],
    }


def _load(raw: Any, flips: list[Flip]) -> Proof | None:
    try:
        keys = {f.key for f in flips}
        changed = {
            str(k): tuple(Resource(ResourceKey(*r[0]), str(r[1]), bool(r[2])) for r in v)
            for k, v in raw["changed"].items()
            if k in keys
        }
        failed = {str(k): str(v) for k, v in raw["failed"].items() if k in keys}
        pending = tuple(str(k) for k in raw.get("pending", []) if k in keys)
        groups = tuple(tuple(str(k) for k in g if k in keys) for g in raw.get("groups", []))
        return Proof(changed, failed, 0, pending, groups)
    except (TypeError, KeyError, ValueError, IndexError):
        return None

"""Which values keys decide whether whole resources render, read from a chart's templates.

Each template is read by the lexer in template_lexer.py (linear in its length); this module
joins the templates of a chart and its vendored subcharts through their named templates and
caches the result by content. A *gate* (a resource switch) is an ``if`` / ``else if`` / ``with``
/ ``else with`` / ``range`` whose block holds a whole document: it opens where a document starts (nothing but comments since the last ``---``) and holds
a ``kind:`` at column 0, directly or through ``include`` / ``template`` of a named template that
does (not re-indented by ``indent``/``nindent``). Conditions that only shape a resource's content
are counted (``content_only``) but are not gates. Keys come from ``.Values.a.b``, ``$.Values.a.b``,
``.x`` inside ``with .Values.a`` (``a.x``), ``$v.x`` after ``$v := .Values.a``, and ``hasKey`` /
``index`` / ``dig`` on a values path. ``Gate.expr`` is the condition exactly as written (runs of
whitespace folded to one space); :func:`expression_keys` reads it back to the gate's keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from cmp_plugin.content_cache import cache_get, cache_put, hasher
from cmp_plugin.helmchart import helmignore
from cmp_plugin.helmchart.template_lexer import (
    MAX_KINDS,
    MAX_SOURCES,
    ROOT,
    Segment,
    Template,
    expression_keys,
    scan_template,
)

__all__ = [
    "ChartScan",
    "Gate",
    "gate_from_json",
    "scan_chart",
]


class Gate(NamedTuple):
    """One values key that decides whether whole resources render."""

    key: str
    """Dotted path from the top of the parent chart's values, e.g. ``redis.enabled``."""
    file: str
    """Where the condition is written: a template path relative to the top chart, or Chart.yaml."""
    line: int
    keyword: str
    """if, else if, with, else with, range, condition or tags."""
    expr: str
    """The condition exactly as written in the template (whitespace folded), or the Chart.yaml entry."""
    resources: tuple[str, ...] = ()
    """The kinds of the gated documents as written (``?`` for a templated kind), at most five."""
    sources: tuple[str, ...] = ()
    """Template paths (relative to the top chart) whose rendered output holds the gated documents."""
    dot: str | None = ROOT
    """What ``.`` means in ``expr``: ROOT, a values path (inside ``with``), or None (unknown)."""
    variables: tuple[tuple[str, str], ...] = ()
    """``$name`` -> values path bindings in effect for ``expr``."""
    scope: str = ""
    """The subchart's values prefix (``redis.``) the keys of ``expr`` are read under."""

    @property
    def condition(self) -> str:
        """The gate as one would write it: keyword and expression."""
        return self.expr if self.keyword in ("condition", "tags") else f"{self.keyword} {self.expr}"


class ChartScan(NamedTuple):
    """Every gate of a chart and its vendored subcharts, and what the scan saw."""

    gates: list[Gate]
    content_only: int
    templates: int
    ignored: int
    incomplete: tuple[str, ...]
    work: int
    """The templates' scan work plus the steps resolving named templates: for the linearity tests."""


class Subchart(NamedTuple):
    """A vendored dependency as the parent chart declares it."""

    path: str
    """Relative to the top chart, e.g. ``charts/redis``."""
    scope: str
    """The values prefix of its keys, e.g. ``cache.`` for an alias."""
    condition: str
    tags: tuple[str, ...]
    line: int
    source: str = ""
    """How helm names its templates in ``# Source:`` (the alias replaces the directory's name)."""


def scan_chart(
    chart_dir: Path, *, subcharts: Iterable[Subchart] = (), cache_dir: Path | None = None
) -> ChartScan:
    """The gates of a chart's templates and of each given subchart's, honouring the top .helmignore.

    With ``cache_dir``, the result is kept under a digest of every template read (and of this
    scanner's version): Argo CD renders the same revision on every refresh, and for each
    Application that uses the chart, so only the first render of a revision pays for the scan.
    """
    rules = helmignore.load(chart_dir)
    charts: list[tuple[Subchart, dict[str, str]]] = []
    ignored = 0
    digest = hasher(_CACHE_VERSION.encode())
    for sub in [Subchart("", "", "", (), 0, ""), *subcharts]:
        files: dict[str, str] = {}
        tdir = chart_dir / sub.path / "templates" if sub.path else chart_dir / "templates"
        if tdir.is_dir():
            for path in sorted(p for p in tdir.rglob("*") if p.is_file()):
                rel = path.relative_to(chart_dir).as_posix()
                if not rules.keeps(rel):
                    ignored += 1
                    continue
                files[rel] = path.read_text(errors="replace")
                digest.update(f"\0{rel}\0{len(files[rel])}\0".encode())
                digest.update(files[rel].encode(errors="replace"))
        digest.update(repr(sub).encode())
        charts.append((sub, files))
    cached = _load_cached(cache_dir, digest.hexdigest()) if cache_dir is not None else None
    if cached is not None:
        return cached
    gates: list[Gate] = []
    content_only = templates = work = 0
    incomplete: list[str] = []
    for sub, files in charts:
        templates += len(files)
        scans = {rel: scan_template(text) for rel, text in files.items()}
        for rel, sc in scans.items():
            work += sc.work
            content_only += sc.content_only
            if not sc.complete:
                incomplete.append(rel)
        found, steps = _chart_gates(scans, sub.scope)
        work += steps
        if sub.path and sub.source != sub.path:
            cut = len(sub.path)
            found = [g._replace(sources=tuple(sub.source + s[cut:] for s in g.sources)) for g in found]
        gates += found
    result = ChartScan(gates, content_only, templates, ignored, tuple(incomplete), work)
    if cache_dir is not None:
        _store(cache_dir, digest.hexdigest(), result)
    return result


_CACHE_VERSION = "driftguard-gates-2"


def gate_from_json(g: Any) -> Gate:
    """A gate as the caches store it (a JSON list of its fields) read back; errors are the caller's."""
    return Gate(
        g[0], g[1], g[2], g[3], g[4], tuple(g[5]), tuple(g[6]), g[7], tuple((a, b) for a, b in g[8]), g[9]
    )


def _load_cached(cache_dir: Path, key: str) -> ChartScan | None:
    raw = cache_get(cache_dir, f"gates-{key}")
    try:
        gates = [gate_from_json(g) for g in raw["gates"]]
        return ChartScan(
            gates, raw["content_only"], raw["templates"], raw["ignored"], tuple(raw["incomplete"]), 0
        )
    except (ValueError, KeyError, TypeError, IndexError):
        return None  # no entry, or one this version cannot read: scan again


def _store(cache_dir: Path, key: str, scan: ChartScan) -> None:
    body = {
        "gates": [list(g) for g in scan.gates],
        "content_only": scan.content_only,
        "templates": scan.templates,
        "ignored": scan.ignored,
        "incomplete": list(scan.incomplete),
    }
    cache_put(cache_dir, f"gates-{key}", body)


def _outputs(rel: str) -> bool:
    """helm prints a template's output unless it is a partial (``_*``) or NOTES.txt."""
    name = rel.rsplit("/", 1)[-1]
    return not name.startswith("_") and name != "NOTES.txt"


def _chart_gates(scans: dict[str, Template], scope: str) -> tuple[list[Gate], int]:
    """The chart's gates, and the steps taken to resolve them (the work the linearity tests count)."""
    steps = 0
    defines: dict[str, tuple[str, Segment]] = {}
    for rel, sc in scans.items():
        for name, seg in sc.defines.items():
            defines[name] = (rel, seg)  # helm: a later file's define wins; files load sorted
    # which defines emit whole documents (directly or through what they include): a worklist, linear
    includers: dict[str, list[str]] = {}
    for name, (_, seg) in defines.items():
        for inc in seg.includes:
            includers.setdefault(inc, []).append(name)
    with_docs = {name for name, (_, seg) in defines.items() if seg.has_doc}
    kinds: dict[str, list[str]] = {name: list(defines[name][1].kinds) for name in with_docs}
    work = list(with_docs)
    while work:
        inc = work.pop()
        for name in includers.get(inc, ()):
            steps += 1
            if name not in with_docs:
                with_docs.add(name)
                kinds[name] = list(kinds.get(inc, ()))[:MAX_KINDS]
                work.append(name)
    # which output templates reach each define (capped): the rendered `# Source:` of its documents
    reach: dict[str, list[str]] = {}
    queue: list[tuple[str, str]] = []
    for rel, sc in scans.items():
        if _outputs(rel):
            for inc in dict.fromkeys(sc.include_sites):
                queue.append((inc, rel))
    while queue:
        name, rel = queue.pop()
        steps += 1
        got = reach.setdefault(name, [])
        if rel in got or len(got) >= MAX_SOURCES or name not in defines:
            continue
        got.append(rel)
        for inc in defines[name][1].includes:
            queue.append((inc, rel))
    gates: list[Gate] = []
    for rel, sc in scans.items():
        in_output = _outputs(rel)
        for seg, dot in sc.gates:
            steps += 1 + len(seg.includes)
            doc_includes = [i for i in seg.includes if i in with_docs]
            if not seg.has_doc and not doc_includes:
                continue
            owner = seg.owner
            if owner is None and not in_output:
                continue  # a partial's top level prints nothing
            sources = tuple(reach.get(owner, [])) if owner is not None else (rel,)
            res = list(seg.kinds)
            for inc in doc_includes:
                steps += len(kinds.get(inc, ()))
                res += [k for k in kinds.get(inc, []) if k not in res]
            for key in expression_keys(seg.expr, dot=dot, variables=seg.variables.items(), scope=scope):
                gates.append(
                    Gate(
                        key,
                        rel,
                        seg.line,
                        seg.keyword,
                        seg.expr,
                        tuple(dict.fromkeys(res))[:MAX_KINDS] or ("?",),
                        sources,
                        dot,
                        tuple(sorted(seg.variables.items())),
                        scope,
                    )
                )
    return gates, steps

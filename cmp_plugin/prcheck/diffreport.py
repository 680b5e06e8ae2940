"""The diff's report for people (text, a PR comment in markdown) and machines (JSON).

Order: whether ``--live`` was used, ApplicationSet errors, then ApplicationSet findings (shrink,
strays), then Applications that disappear (with the ApplicationSet and the reason, and what would
be pruned), then every other environment, removals first. Inside an environment: the live changes
the merge would overwrite, then removed, kept, added, renamed and changed resources, the last two
field by field (readable path, old -> new, as the alerts write them).

Every string that comes from the repository or the PR goes through cmp_plugin/prcheck/mdtext.py: one line
in text, escaped inline Markdown or a code span in a comment. The JSON output follows
docs/pr-check.schema.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cmp_plugin.prcheck import mdtext
from cmp_plugin.prcheck.envdiff import Change, EnvDiff, Report
from cmp_plugin.prcheck.envlive import PRUNED, LiveDiff, Overwrite

__all__ = ["FIELDS_SHOWN", "LIVE_NOT_USED", "env_json", "render_report", "report_json"]

FIELDS_SHOWN = 25
"""Field changes shown per resource in text and Markdown (the JSON carries up to fieldchanges.MAX_FIELDS)."""
LIVE_NOT_USED = (
    "--live was not used: live changes in the cluster that this merge would overwrite were not checked"
)
SCHEMA_VERSION = 1


def _items(changes: list[Change]) -> list[dict[str, Any]]:
    out = []
    for c in changes:
        item: dict[str, Any] = {
            "resource": str(c.key),
            "group": c.key.group,
            "kind": c.key.kind,
            "namespace": c.key.namespace,
            "name": c.key.name,
            "cause": c.cause,
        }
        if c.renamed_from is not None:
            item["from"] = str(c.renamed_from)
            item["fromName"] = c.renamed_from.name
        if c.fields or c.more_fields or c.renamed_from is not None:
            item["fields"] = [f.to_json() for f in c.fields]
            item["moreFields"] = c.more_fields
        out.append(item)
    return out


def _failed(d: EnvDiff) -> list[str]:
    return [label for label in ("base", "head") if label in d.errors]


def _live_json(live: LiveDiff | None) -> dict[str, Any] | None:
    if live is None:
        return None
    return {
        "absent": live.absent,
        "error": live.error,
        "identity": live.identity,
        "compared": live.compared,
        "overwrites": [o.to_json() for o in live.overwrites],
    }


def env_json(d: EnvDiff) -> dict[str, Any]:
    env = d.env
    live = d.live if isinstance(d.live, LiveDiff) else None
    counts = None
    if not _failed(d):
        counts = {
            "removed": len(d.removed),
            "added": len(d.added),
            "changed": len(d.changed),
            "renamed": len(d.renamed),
            "overwrites": len(live.overwrites) if live is not None else None,
        }
    return {
        "name": env.name,
        "path": env.path,
        "status": _status(d),
        "failed": _failed(d),
        "counts": counts,
        "applicationSet": env.appset,
        "origin": env.origin,
        "deletion": d.deletion,
        "definition": d.definition,
        "removed": _items(d.removed),
        "kept": _items(d.kept),
        "added": _items(d.added),
        "changed": _items(d.changed),
        "renamed": _items(d.renamed),
        "errors": d.errors,
        "live": _live_json(live),
    }


def _status(d: EnvDiff) -> str:
    if d.base is not None and d.head is None:
        return "deleted"
    if d.base is None:
        return "created"
    return "redefined" if d.definition else "kept"


def report_json(report: Report) -> dict[str, Any]:
    """The report as docs/pr-check.schema.json describes it."""
    return {
        "version": SCHEMA_VERSION,
        "base": report.base_sha,
        "head": report.head_sha,
        "live": {"used": report.live, "note": "" if report.live else LIVE_NOT_USED},
        "applicationSetErrors": report.errors,
        "findings": [
            {"kind": f.kind, "applicationSet": f.appset, "message": f.message, "allowed": f.allowed}
            for f in report.findings
        ],
        "environments": [env_json(d) for d in report.diffs],
    }


def render_report(report: Report, *, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report_json(report), indent=2) + "\n"
    return _Writer(markdown=fmt == "markdown").report(report)


def overwrite_sentence(o: Overwrite, code: Callable[[str], str], plain: Callable[[str], str]) -> str:
    """``<path>: live 4 (Git 2) -> 2: this merge reverts <who>``; ``code``/``plain`` write untrusted parts."""
    head = "pruned with the resource" if o.head == PRUNED else code(o.head)
    actor = o.who()
    by = f" made by {plain(actor)}" if actor else ""
    return (
        f"{code(o.path)}: live {code(o.live)} (Git {code(o.base)}) -> {head}: "
        f"this merge reverts the live change{by}"
    )


class _Writer:
    """Text or Markdown, the same content; every untrusted string through ``plain``/``code``."""

    def __init__(self, *, markdown: bool) -> None:
        self.md = markdown
        self.plain: Callable[[object], str] = mdtext.text if markdown else mdtext.oneline
        self.code: Callable[[object], str] = mdtext.code if markdown else mdtext.oneline

    def item(self, tag: str, body: str, *, indent: int = 0) -> str:
        if self.md:
            return "  " * indent + f"- **{tag.lower()}** {body}" if tag else "  " * indent + f"- {body}"
        return "  " + " " * 9 * indent + (f"{tag:8} {body}" if tag else body)

    def report(self, report: Report) -> str:
        md, lines = self.md, []
        if md:
            lines += [
                f"## driftguard: rendered diff `{report.base_sha[:12]}` -> `{report.head_sha[:12]}`",
                "",
            ]
        live = self.live_note(report)
        if md:
            lines += [f"**live**: {mdtext.text(live)}", ""]
        for label, errs in report.errors.items():
            for e in errs:
                msg = self.plain(e)
                lines.append(
                    f"- **ApplicationSet error at {label}**: {msg}" if md else f"ERROR at {label}: {msg}"
                )
        for f in report.findings:
            tag = "ALLOWED" if f.allowed else ("SHRINK" if f.kind == "shrink" else "STRAY")
            msg = self.plain(f.message)
            lines.append(f"- **{tag.lower()}**: {msg}" if md else f"{tag}: {msg}")
        if report.errors or report.findings:
            lines.append("")
        if md:
            lines += self.table(report)
        for d in report.diffs:
            lines += self.environment(d)
        if not md:  # last, so a text report still starts with what blocks
            lines.append(f"live: {live}")
        return "\n".join(lines) + ("\n" if not md else "")

    @staticmethod
    def live_note(report: Report) -> str:
        if not report.live:
            return LIVE_NOT_USED
        n = sum(len(d.live.overwrites) for d in report.diffs if isinstance(d.live, LiveDiff))
        return f"compared with the cluster through Argo CD: {n} live change(s) this merge would overwrite"

    def table(self, report: Report) -> list[str]:
        lines = [
            "| environment | removed | added | changed | renamed | overwrites live |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for d in report.diffs:
            name = mdtext.code(d.name, cell=True)
            failed = _failed(d)
            if failed:
                flag = f" **(render failed at {' and '.join(failed)})**"
                lines.append(f"| {name}{flag} | failed | failed | failed | failed | failed |")
                continue
            flag = " **(deleted)**" if _status(d) == "deleted" else ""
            live = str(len(d.live.overwrites)) if isinstance(d.live, LiveDiff) and not d.live.error else "-"
            lines.append(
                f"| {name}{flag} | {len(d.removed)} | {len(d.added)} | {len(d.changed)} | {len(d.renamed)} | {live} |"
            )
        lines.append("")
        return lines

    def header(self, d: EnvDiff) -> str:
        env = d.env
        where = f"{self.plain(env.name)} ({self.plain(env.path)})"
        failed = _failed(d)
        if failed:
            # never counts: a side that did not render has nothing to count against
            return f"{where}: RENDER FAILED at {' and '.join(failed)}, nothing compared"
        counts = f"{len(d.removed)} removed, {len(d.added)} added, {len(d.changed)} changed"
        if d.renamed:
            counts += f", {len(d.renamed)} renamed"
        if isinstance(d.live, LiveDiff) and d.live.overwrites:
            counts += f", {len(d.live.overwrites)} live change(s) overwritten"
        header = f"{where}: {counts}"
        if _status(d) == "deleted":
            header += " [Application deleted]"
        elif _status(d) == "created":
            header += " [new Application]"
        return header

    def environment(self, d: EnvDiff) -> list[str]:
        env, md = d.env, self.md
        lines = [f"### {self.header(d)}" if md else f"== {self.header(d)}"]
        notes = []
        if d.deletion:
            notes.append(f"deleted: {self.plain(d.deletion)}")
        if env.appset and _status(d) != "deleted":
            notes.append(
                f"generated by ApplicationSet {self.plain(env.appset)} from {self.plain(env.origin)}"
            )
        notes += [f"definition: {self.plain(c)}" for c in d.definition]
        notes += [f"render failed at {label}: {self.plain(err)}" for label, err in d.errors.items()]
        if isinstance(d.live, LiveDiff):
            if d.live.error:
                notes.append(f"live: cannot compare with the cluster: {self.plain(d.live.error)}")
            elif d.live.absent:
                notes.append("live: Argo CD has no such Application yet; nothing of it runs")
            if d.live.identity:
                notes.append(f"live: {self.plain(d.live.identity)}")
        lines += [self.item("", n) for n in notes]
        if isinstance(d.live, LiveDiff):
            for o in d.live.overwrites:
                lines.append(
                    self.item(
                        "OVERWRITE", f"{self.code(o.key)} {overwrite_sentence(o, self.code, self.plain)}"
                    )
                )
        for title, changes in (("REMOVED", d.removed), ("KEPT", d.kept), ("ADDED", d.added)):
            for c in changes:
                cause = f" <- {self.plain(c.cause)}" if c.cause else ""
                lines.append(self.item(title, f"{self.code(c.key)}{cause}"))
        for c in d.renamed:
            assert c.renamed_from is not None
            body = (
                f"{self.code(c.renamed_from)} -> {self.code(c.key.name)} "
                "(a generated name's hash suffix; not a removal)"
            )
            lines.append(self.item("RENAMED", body))
            lines += self.fields(c)
        for c in d.changed:
            lines.append(self.item("CHANGED", self.code(c.key)))
            lines += self.fields(c)
        lines.append("")
        return lines

    def fields(self, c: Change) -> list[str]:
        out = [
            self.item("", f"{self.code(f.path)}: {self.code(f.old)} -> {self.code(f.new)}", indent=1)
            for f in c.fields[:FIELDS_SHOWN]
        ]
        more = len(c.fields) - FIELDS_SHOWN + c.more_fields
        if more > 0:
            out.append(self.item("", f"... and {more} more field(s) (see --format json)", indent=1))
        return out

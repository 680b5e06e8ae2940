"""``driftguard-cmp diff``'s flags and exit codes (cli.py hands the subcommand over here).

Exit 0: nothing blocks. 1: a blocking finding: an environment matching ``--fail-on-removal``
loses resources (an Application deleted with pruning included; a generated ConfigMap/Secret whose
hash suffix changed is a rename, not a loss), an environment matching ``--fail-on-overwrite`` would
overwrite a live change (or its live side cannot be read), an ApplicationSet shrinks past
``--max-appset-shrink`` without ``--allow-appset-shrink``, or a new Application comes from a
stray-artifact path. 2: something cannot be rendered or expanded at head, or ``--live`` is not
configured.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

__all__ = ["add_arguments", "command", "progress_reporter"]

POLICIES = ("create-only", "create-update", "create-delete", "sync")


def _ratio(text: str) -> float:
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share like 20% or 0.2, got {text!r}") from None
    share = value / 100 if text.strip().endswith("%") or value > 1 else value
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0% and 100%")
    return share


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return value

    return parse


def add_arguments(dif: argparse.ArgumentParser) -> None:
    dif.add_argument("--base", required=True, help="the base revision (e.g. origin/main)")
    dif.add_argument("--head", required=True, help="the head revision (e.g. HEAD)")
    dif.add_argument(
        "targets",
        nargs="+",
        metavar="TARGET",
        help="Application or ApplicationSet manifests, directories or globs of them, or app paths",
    )
    dif.add_argument(
        "--fail-on-removal",
        action="append",
        default=[],
        metavar="GLOB",
        help="exit 1 when a matching environment (Application name) would lose resources",
    )
    dif.add_argument(
        "--live",
        action="store_true",
        help="compare with the cluster through Argo CD (DRIFTGUARD_ARGOCD_URL, DRIFTGUARD_ARGOCD_TOKEN or "
        "_TOKEN_FILE): list the live changes the merge would overwrite",
    )
    dif.add_argument(
        "--fail-on-overwrite",
        action="append",
        default=[],
        metavar="GLOB",
        help="with --live: exit 1 when a matching environment (Application name, Argo CD glob) would "
        "overwrite a live change (repeatable)",
    )
    dif.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    dif.add_argument(
        "--repo-url",
        action="append",
        default=[],
        metavar="URL",
        help="a URL git generators may name for this repository (besides its remotes; repeatable)",
    )
    dif.add_argument(
        "--clusters", type=Path, metavar="FILE", help="the clusters a clusters generator sees (YAML list)"
    )
    dif.add_argument(
        "--policy",
        choices=POLICIES,
        default="",
        help="the ApplicationSet controller's --policy (default: each ApplicationSet's applicationsSync)",
    )
    dif.add_argument(
        "--max-appset-shrink",
        type=_ratio,
        default=0.2,
        metavar="SHARE",
        help="an ApplicationSet may stop generating at most this share of its Applications (default 20%%)",
    )
    dif.add_argument(
        "--allow-appset-shrink",
        action="append",
        default=[],
        metavar="NAME",
        help="this ApplicationSet (name or glob) may shrink: the PR says it is intended (repeatable)",
    )
    dif.add_argument(
        "--stray-pattern",
        action="append",
        default=[],
        metavar="GLOB",
        help="another path pattern that marks committed render output (repeatable)",
    )
    dif.add_argument(
        "--max-apps",
        type=_positive(int),
        default=1000,
        help="refuse to render more Applications (default 1000)",
    )
    dif.add_argument(
        "--timeout",
        type=_positive(float),
        default=1800.0,
        metavar="SECONDS",
        help="stop the whole diff after this long (default 1800)",
    )
    dif.set_defaults(func=command)


def progress_reporter(stream: TextIO | None = None) -> Callable[[int, int, str], None] | None:
    """One line on a terminal, rewritten per Application (a big repository takes minutes); nothing
    when stderr is not a terminal or in CI (the convention CI=true/1 of GitHub Actions, GitLab and
    others), so logs and PR checks stay as they were."""
    out = sys.stderr if stream is None else stream
    if not out.isatty() or os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return None

    def report(done: int, total: int, name: str) -> None:
        # the name comes from the repository: no control character reaches the terminal
        shown = "".join(ch if ch.isprintable() else "?" for ch in name)[:80]
        out.write(f"\r\x1b[Kdriftguard: rendering {done + 1}/{total} {shown}")
        out.flush()

    return report


def command(args: argparse.Namespace) -> int:
    from cmp_plugin.prcheck import diffreport, envdiff
    from cmp_plugin.prcheck.appset.clusters import load_clusters
    from cmp_plugin.prcheck.mdtext import oneline
    from cmp_plugin.settings import CmpSettings
    from driftguard import globs
    from driftguard.redact import Redactor

    if args.fail_on_overwrite and not args.live:
        sys.stderr.write("driftguard: error: --fail-on-overwrite needs --live (the cluster's side)\n")
        return 2
    clusters = tuple(load_clusters(args.clusters)) if args.clusters else None
    redactor = Redactor()  # Secret values masked with a key of this run only
    live = None
    if args.live:
        from cmp_plugin.prcheck.envlive import LiveChecker

        live = LiveChecker.from_env(os.environ, redactor=redactor)
    options = envdiff.DiffOptions(
        repo_urls=tuple(args.repo_url),
        clusters=clusters,
        policy=args.policy,
        max_appset_shrink=args.max_appset_shrink,
        allow_appset_shrink=tuple(args.allow_appset_shrink),
        max_apps=args.max_apps,
        timeout=args.timeout,
        stray_patterns=tuple(args.stray_pattern),
        live=live,
        redactor=redactor,
    )
    progress = progress_reporter()
    try:
        report = envdiff.diff_revisions(
            args.targets,
            base=args.base,
            head=args.head,
            cwd=Path.cwd(),
            settings=CmpSettings.from_env(),
            options=options,
            progress=progress,
        )
    finally:
        if progress is not None:
            sys.stderr.write("\r\x1b[K")  # the progress line goes before the report is written
            sys.stderr.flush()
    sys.stdout.write(diffreport.render_report(report, fmt=args.format))
    broken = [d.name for d in report.diffs if d.broken]
    if report.errors.get("head"):
        sys.stderr.write(
            f"driftguard: error: {len(report.errors['head'])} ApplicationSet(s) cannot be expanded at the head revision: "
            f"{oneline(report.errors['head'][0])}\n"
        )
        return 2
    if broken:
        sys.stderr.write(
            f"driftguard: error: {oneline(', '.join(broken))} cannot be rendered at the head revision\n"
        )
        return 2
    blocked = [
        d.name
        for d in report.diffs
        if any(fnmatch.fnmatchcase(d.name, p) for p in args.fail_on_removal) and (d.removed or d.broken)
    ]
    # Argo CD's glob (gobwas, as sync windows match application names): driftguard/globs.py
    overwriting = [
        d.name
        for d in report.diffs
        if any(globs.match(p, d.name) for p in args.fail_on_overwrite)
        and d.live is not None
        and (d.live.overwrites or d.live.error)
    ]
    findings = [f for f in report.findings if not f.allowed]
    if blocked:
        sys.stderr.write(
            f"driftguard: refused by diff: destructive changes in {oneline(', '.join(blocked))} (--fail-on-removal)\n"
        )
    for name in overwriting:
        d = next(x for x in report.diffs if x.name == name)
        what = (
            f"{len(d.live.overwrites)} live change(s) would be overwritten"
            if d.live.overwrites
            else f"the live side cannot be read ({d.live.error})"
        )
        sys.stderr.write(f"driftguard: refused by diff: {oneline(name)}: {what} (--fail-on-overwrite)\n")
    for f in findings:
        fix = " (label the PR and pass --allow-appset-shrink NAME if intended)" if f.kind == "shrink" else ""
        sys.stderr.write(f"driftguard: refused by appset-{f.kind}: {oneline(f.message)}{fix}\n")
    return 1 if blocked or findings or overwriting else 0

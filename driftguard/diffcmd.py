"""``driftguard diff``: the drift engine on two manifests or a saved Argo CD managed-resources answer.

    driftguard diff (--desired FILE --live FILE | --managed-resources FILE)
                    [--namespace NS] [--app FILE] [--argocd-cm FILE] [--format text|json]

``--desired/--live`` pairs objects the way Argo CD's controller does: a namespaced object without a
namespace in Git takes the destination namespace (``--namespace``, else the ``--app``'s
``spec.destination.namespace``), a cluster-scoped one loses any namespace Git gave it.

Exit status: 0 no alerting drift, 1 alerting drift (human, missing, prune-candidate), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from driftguard.argocd_cm import system_rules_from_file
from driftguard.console import add_version, quiet_on_closed_pipe
from driftguard.drift import ALERTING, CLASSES, DriftEngine, ResourceDrift
from driftguard.errors import DriftguardError, InputError
from driftguard.ignore import IgnoreRules, rules_from_application
from driftguard.manifests import load_file


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="driftguard", description="driftguard's drift engine for people")
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    diff = sub.add_parser("diff", help="field-level drift between Git and the cluster, classified")
    src = diff.add_mutually_exclusive_group(required=True)
    src.add_argument("--desired", type=Path, help="manifests as Git renders them (YAML/JSON, multi-document)")
    src.add_argument("--managed-resources", type=Path, help="a saved Argo CD managed-resources answer (JSON)")
    diff.add_argument("--live", type=Path, help="manifests as the cluster holds them (with --desired)")
    diff.add_argument(
        "--namespace",
        help="the destination namespace for Git objects without one (default: the --app's destination)",
    )
    diff.add_argument(
        "--app",
        type=Path,
        help="the Argo CD Application manifest (its ignoreDifferences apply; its destination namespace pairs objects)",
    )
    diff.add_argument(
        "--argocd-cm", type=Path, help="the argocd-cm ConfigMap (system-level ignoreDifferences)"
    )
    diff.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``driftguard`` and ``python -m driftguard``."""
    return quiet_on_closed_pipe(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.desired is not None and args.live is None:
        parser.error("--desired needs --live")
    try:
        drifts = run_diff(args)
    except DriftguardError as exc:
        print(f"driftguard: error: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        json.dump(to_json(drifts), sys.stdout, indent=2, sort_keys=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(to_text(drifts))
    return 1 if any(c.cls in ALERTING for d in drifts for c in d.changes) else 0


def run_diff(args: argparse.Namespace) -> list[ResourceDrift]:
    """Load the inputs named by ``args`` and run the engine."""
    rules = []
    namespace = ""
    ssa = False
    if args.app is not None:
        docs = load_file(args.app)
        apps = [d.obj for d in docs if d.obj.get("kind") == "Application"]
        if len(apps) != 1:
            raise InputError(f"{args.app}: expected one Application, found {len(apps)}")
        rules += rules_from_application(apps[0])
        spec = apps[0].get("spec") or {}
        namespace = str((spec.get("destination") or {}).get("namespace") or "")
        # controller/state.go: an app that syncs with ServerSideApply=true is compared that way
        sync_options = (spec.get("syncPolicy") or {}).get("syncOptions") or []
        ssa = isinstance(sync_options, list) and "ServerSideApply=true" in sync_options
    if args.argocd_cm is not None:
        rules += system_rules_from_file(args.argocd_cm, setting="--argocd-cm")
    if args.namespace is not None:
        namespace = args.namespace
    engine = DriftEngine(IgnoreRules(rules), server_side_apply=ssa)
    try:
        if args.managed_resources is not None:
            return engine.managed_resources(_managed_items(args.managed_resources))
        desired = [d.obj for d in load_file(args.desired)]
        live = [d.obj for d in load_file(args.live)]
        return engine.pairs(desired, live, default_namespace=namespace)
    finally:
        engine.rules.close()


def _managed_items(path: Path) -> list[dict[str, Any]]:
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from exc
    except ValueError as exc:
        raise InputError(f"{path}: not JSON: {exc}") from exc
    items = raw.get("items") if isinstance(raw, dict) else raw
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise InputError(f'{path}: expected Argo CD\'s managed-resources answer: {{"items": [...]}}')
    return items


def to_json(drifts: list[ResourceDrift]) -> dict[str, Any]:
    changes = [c.to_json() for d in drifts for c in d.changes]
    counts = {cls: sum(1 for c in changes if c["class"] == cls) for cls in CLASSES}
    return {"changes": changes, "counts": counts, "alerting": sum(counts[c] for c in ALERTING)}


def to_text(drifts: list[ResourceDrift]) -> str:
    """Grouped by resource and class, resources with human drift first."""
    lines: list[str] = []
    ordered = sorted(
        (d for d in drifts if d.changes), key=lambda d: (min(CLASSES.index(c.cls) for c in d.changes), d.key)
    )
    for drift in ordered:
        lines.append(f"{drift.key} [{drift.status}]")
        for cls in CLASSES:
            group = drift.by_class(cls)
            if not group:
                continue
            lines.append(f"  {cls} ({len(group)})")
            for c in group:
                who = f"  by {c.actor.manager} ({c.actor.operation}) at {c.actor.time}" if c.actor else ""
                lines.append(
                    f"    {c.change.op:7} {c.change.path or '/'}: {_short(c.change.old)} -> {_short(c.change.new)}{who}"
                )
    if not lines:
        return "no drift\n"
    total = sum(1 for d in drifts for c in d.changes if c.cls in ALERTING)
    lines.append(f"{total} alerting change(s)")
    return "\n".join(lines) + "\n"


def _short(value: Any, limit: int = 80) -> str:
    text = "∅" if value is None else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"

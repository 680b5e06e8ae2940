#!/usr/bin/env python3
"""What moving from helm 3 to helm 4 changes in a render, chart by chart.

Renders every helm case of the given corpora (found as scripts/chart_cases.py finds them: a chart's
default values, then up to two ci/*.yaml) with two helm binaries and Argo CD's native flags, and
prints per case whether the output is byte-identical, the same objects in another text (document
order, ``# Source:`` comments, blank lines), or other objects, with the fields that differ.
docs/helm4.md quotes its output; nothing in `make test` runs it (it needs a helm 3 binary).

Usage: helm_major_diff.py --old HELM3 --new HELM4 CORPUS_DIR [CORPUS_DIR...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from chart_cases import Case, bare_argv, find_cases, ident, objects  # noqa: E402


def render(helm: str, case: Case) -> tuple[int, str, str]:
    argv = bare_argv(case, {"helm": helm})
    proc = subprocess.run(argv, cwd=case.app_dir, capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def changed_paths(a: Any, b: Any, path: str = "") -> list[str]:
    """JSON-pointer-like paths where ``a`` and ``b`` differ (first level of difference)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{path}/{key} ({'added' if key not in a else 'removed'})")
            else:
                out += changed_paths(a[key], b[key], f"{path}/{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in changed_paths(x, y, f"{path}/{i}")
        ]
    return [] if a == b else [f"{path}: {json.dumps(a)[:80]} -> {json.dumps(b)[:80]}"]


def source_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("# Source:")]


def compare(case: Case, old: str, new: str) -> list[str]:
    code_a, out_a, err_a = render(old, case)
    code_b, out_b, err_b = render(new, case)
    if code_a or code_b:
        same = "same" if (code_a != 0) == (code_b != 0) else "DIFFERENT"
        return [
            f"both exit non-zero ({same} outcome)" if code_a and code_b else f"exit {code_a} -> {code_b}",
            f"  helm 3: {err_a.strip().splitlines()[-1][:200] if err_a.strip() else ''}",
            f"  helm 4: {err_b.strip().splitlines()[-1][:200] if err_b.strip() else ''}",
        ]
    if out_a == out_b:
        return ["byte-identical"]
    objs_a, objs_b = objects(out_a), objects(out_b)
    lines = []
    if Counter(objs_a) == Counter(objs_b):
        order = [ident(x) for x in objs_a] != [ident(x) for x in objs_b]
        sources = source_lines(out_a) != source_lines(out_b)
        lines.append(
            "same objects, other text"
            + (": document order differs" if order else "")
            + ("; # Source: lines differ" if sources else "")
        )
        if sources:
            for a, b in zip(source_lines(out_a), source_lines(out_b), strict=False):
                if a != b:
                    lines.append(f"  {a!r} -> {b!r}")
                    break
        return lines
    by_a = {ident(x): json.loads(x) for x in objs_a}
    by_b = {ident(x): json.loads(x) for x in objs_b}
    lines.append(f"OBJECTS DIFFER: {len(objs_a)} -> {len(objs_b)} objects")
    for key in sorted(set(by_a) - set(by_b)):
        lines.append(f"  only with helm 3: {key}")
    for key in sorted(set(by_b) - set(by_a)):
        lines.append(f"  only with helm 4: {key}")
    for key in sorted(set(by_a) & set(by_b)):
        if by_a[key] != by_b[key]:
            for p in changed_paths(by_a[key], by_b[key])[:5]:
                lines.append(f"  {key} {p}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="the helm 3 binary")
    ap.add_argument("--new", required=True, help="the helm 4 binary")
    ap.add_argument("corpora", nargs="+", type=Path)
    args = ap.parse_args()
    tally: Counter[str] = Counter()
    for corpus in args.corpora:
        for case in find_cases(corpus):
            if case.kind != "helm":
                continue
            lines = compare(case, args.old, args.new)
            tally[lines[0].split(":")[0].split(" (")[0]] += 1
            print(f"{corpus.name}/{case.name}: {lines[0]}")
            for line in lines[1:]:
                print(line)
    print("tally: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

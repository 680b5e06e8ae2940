#!/usr/bin/env python3
"""`make corpus`: the project's checks over the development corpora in ../shared/corpus.

The corpora are real inputs the project did not write (real Helm charts and Argo CD's kustomize
bases; Argo CD's own Go test cases as data). They sit beside the project in CI and on the
developers' machines, never in a clone from the project's public home, so `make test` does not
read them: this target does.

What it runs, each printing HOLDS/SHORT per case:
  reference   tests/reference/* are unmodified copies of ../shared/reference/*
  argo-cases  ../shared/corpus/argo-cases/run.py (diff, ignore rules, sync windows, CMP)
  charts      scripts/chart_cases.py ../shared/corpus/charts: object parity of `driftguard-cmp
              generate` with bare helm / kustomize, objects read as Argo CD's Go YAML reads them
              (the shared run_charts.py reads them with PyYAML, which cannot load the
              prometheus-operator CRDs); no timings: those come from `make bench`
              (bench/real_charts.py), never from here

The ratchet: cases known to fall short are listed, each with the issue that fixes it, in
scripts/corpus_known_short.txt. A short case not listed there fails the target (a regression or a
new gap), and so does a listed case that now holds (take it off the list in the same change).

Usage: corpus.py [--shared DIR]   (default: ../shared beside the project's root)
Exit 0 when every case holds or is a listed known shortfall; 1 otherwise; 2 when the corpora are
not there or a runner cannot start.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KNOWN_SHORT = ROOT / "scripts" / "corpus_known_short.txt"
REFERENCE_COPY = ROOT / "tests" / "reference"


@dataclass
class Suite:
    name: str
    holds: list[str] = field(default_factory=list)
    short: dict[str, str] = field(default_factory=dict)  # label -> detail


def known_short() -> dict[str, str]:
    """label -> the issue that fixes it, from the ratchet file (`label  # issue N`)."""
    known: dict[str, str] = {}
    for raw in KNOWN_SHORT.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        label, _, why = line.partition("  #")
        known[label.strip()] = why.strip()
    return known


def check_reference(shared: Path) -> Suite:
    suite = Suite("reference")
    upstream = shared / "reference"
    for src in sorted(p for p in upstream.rglob("*") if p.is_file()):
        rel = src.relative_to(upstream).as_posix()
        copy = REFERENCE_COPY / rel
        if not copy.is_file():
            suite.short[rel] = "missing from tests/reference (copy it and list it in SOURCES.md)"
        elif not filecmp.cmp(src, copy, shallow=False):
            suite.short[rel] = "differs from ../shared/reference (copies stay unmodified)"
        else:
            suite.holds.append(rel)
    return suite


# "HOLDS diff: TestX", "SHORT diff: TestX -- detail", "HOLDS argo-cd[ci/x.yaml]: 59 resources, ..."
LINE = re.compile(r"^(HOLDS|SHORT) (.*)$")


def label_of(suite: str, rest: str) -> tuple[str, str]:
    head, _, detail = rest.partition(" -- ")
    if suite == "charts":
        end = head.find("]:")
        head = head[: end + 1] if end >= 0 else head.split(":", 1)[0]
    return head.strip(), detail.strip()


def run_suite(name: str, cmd: list[str], env: dict[str, str]) -> Suite:
    suite = Suite(name)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, cwd=ROOT)
    for line in proc.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        label, detail = label_of(name, m.group(2))
        if m.group(1) == "HOLDS":
            suite.holds.append(label)
        else:
            suite.short[label] = detail
    if proc.returncode not in (0, 1) or not (suite.holds or suite.short):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        print(f"corpus: {name}: the runner did not run (exit {proc.returncode})", file=sys.stderr)
        for line in tail:
            print(f"  {line}", file=sys.stderr)
        raise SystemExit(2)
    return suite


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    args = ap.parse_args()
    corpus = args.shared / "corpus"
    if not corpus.is_dir():
        print(
            f"corpus: {corpus} is not there: `make corpus` needs the development corpora beside the "
            "project (CI has them); `make test` does not",
            file=sys.stderr,
        )
        return 2
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(ROOT / ".tools" / "bin"), str(bin_dir), env.get("PATH", "")])
    suites = [
        check_reference(args.shared),
        run_suite(
            "argo-cases",
            [sys.executable, str(corpus / "argo-cases" / "run.py"), str(corpus / "argo-cases")],
            env,
        ),
        run_suite(
            "charts",
            # parity only (timings belong to `make bench`)
            [sys.executable, str(ROOT / "scripts" / "chart_cases.py"), str(corpus / "charts")],
            env,
        ),
    ]
    known = known_short()
    seen: set[str] = set()
    failed = False
    for suite in suites:
        for label, detail in sorted(suite.short.items()):
            seen.add(label)
            if label in known:
                print(f"KNOWN {suite.name}: {label} ({known[label]})")
            else:
                failed = True
                print(f"SHORT {suite.name}: {label} -- {detail}")
        for label in suite.holds:
            if label in known:
                failed = True
                print(f"FIXED {suite.name}: {label} holds now: take it off scripts/corpus_known_short.txt")
    stale = sorted(set(known) - seen - {h for s in suites for h in s.holds})
    for label in stale:
        failed = True
        print(f"STALE {label}: listed in scripts/corpus_known_short.txt but no runner reported it")
    tally = ", ".join(
        f"{s.name} {len(s.holds)}/{len(s.holds) + len(s.short)} hold"
        + (f" ({sum(1 for x in s.short if x in known)} known short)" if s.short else "")
        for s in suites
    )
    print(f"corpus: {tally}")
    if failed:
        print("corpus: FAILED: a case fell short that is not a known shortfall, or the known list is stale")
        return 1
    print("corpus: ok (every case holds or is a known shortfall with its issue)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

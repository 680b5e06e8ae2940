#!/usr/bin/env python3
"""`driftguard-cmp generate` vs bare `helm template` / `kubectl kustomize` on the real-chart corpus.

Every case of ../shared/corpus/charts (scripts/chart_cases.py finds them: a chart's default values
and up to two ci/*.yaml, Argo CD's kustomize bases), each run with Argo CD's environment and its
native flags, interleaved (bare, driftguard, driftguard, bare, ...), median of --runs (7) pairs.
Targets: median ratio <= 1.3x over all cases, no case above 1.8x. Prints a table and the load
average: on a shared machine only the ratio against the same run's baseline means anything.
Cases whose bare render fails (a chart without its vendored dependencies) are listed, not timed.

driftguard runs as the sidecar manifests ship it, with the preload server
(DRIFTGUARD_CMP_PRELOAD=on, cmp_plugin/preload); ``--preload off`` measures every render
starting Python and importing the plugin itself.

Usage: real_charts.py [--corpus DIR] [--runs N] [--only NAME[,NAME]] [--preload on|off]
Exit 1 when a target is missed; 0 (with a note) when the corpus is not beside the project.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import chart_cases  # noqa: E402

MEDIAN_TARGET, MAX_TARGET = 1.3, 1.8


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus" / "charts")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", default="")
    ap.add_argument(
        "--preload",
        choices=("on", "off"),
        default="on",
        help="DRIFTGUARD_CMP_PRELOAD for driftguard (default on: what the sidecar manifests ship)",
    )
    args = ap.parse_args()
    if not args.corpus.is_dir():
        print(f"real_charts: {args.corpus} is not there (the development corpus); nothing measured")
        return 0
    os.environ["PATH"] = os.pathsep.join(
        [str(ROOT / ".tools/bin"), str(Path(sys.executable).parent), os.environ["PATH"]]
    )
    t = chart_cases.tools()
    chart_cases.compile_bytecode()
    cases = chart_cases.find_cases(args.corpus.resolve(), only=frozenset(filter(None, args.only.split(","))))
    load_before = os.getloadavg()
    rows, skipped = [], []
    for case in cases:
        cache = Path(tempfile.mkdtemp(prefix="real-charts-"))
        try:
            env = chart_cases.dg_env(case, cache)
            env["DRIFTGUARD_CMP_PRELOAD"] = args.preload
            # cold renders: the render cache would serve every timed run after the first (monorepo.py times hits)
            env["DRIFTGUARD_CMP_RENDER_CACHE_BYTES"] = "0"
            bare = chart_cases.bare_argv(case, t)
            dg = [t["driftguard-cmp"], "generate"]
            rc, out, err, _ = chart_cases.run(bare, case.app_dir)
            if rc != 0:
                skipped.append(f"{case.name}: bare tool fails ({err.strip().splitlines()[0][:100]})")
                continue
            resources = len(chart_cases.objects(out))
            chart_cases.run(dg, case.app_dir, env)  # warm: the launch plan and baseline exist from now on
            if args.preload == "on":  # and the preload server the first render started
                chart_cases.wait_for_preload(cache)
                chart_cases.run(dg, case.app_dir, env)
            # the implicit-defaults proof the first render left pending ends in the background
            # (cmp_plugin/proof_background.py): timed beside it, a run measures that proof's helm
            chart_cases.wait_for_background_proofs(cache)
            ratios, bare_ms, dg_ms = [], [], []
            for i in range(args.runs):
                took = {}
                for which in ("bare", "dg") if i % 2 == 0 else ("dg", "bare"):
                    rc, _, err, s = chart_cases.run(
                        bare if which == "bare" else dg, case.app_dir, None if which == "bare" else env
                    )
                    if rc != 0:
                        sys.exit(f"real_charts: {case.name}: {which} failed: {err.strip()[:300]}")
                    took[which] = s
                ratios.append(took["dg"] / took["bare"])
                bare_ms.append(took["bare"] * 1000)
                dg_ms.append(took["dg"] * 1000)
            rows.append(
                (
                    case.name,
                    resources,
                    statistics.median(bare_ms),
                    statistics.median(dg_ms),
                    statistics.median(ratios),
                )
            )
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        print(f"  {rows[-1][0]}: {rows[-1][4]:.2f}x", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    width = max([len(r[0]) for r in rows] + [4])
    print(f"{'case':<{width}}  resources  bare ms  driftguard ms  ratio")
    for name, resources, b, d, r in rows:
        print(f"{name:<{width}}  {resources:>9}  {b:>7.0f}  {d:>13.0f}  {r:>5.2f}")
    for line in skipped:
        print(f"not timed: {line}")
    if not rows:
        print("real_charts: no case rendered")
        return 1
    ratios = [r[4] for r in rows]
    med, worst = statistics.median(ratios), max(ratios)
    print(
        f"median {med:.2f}x (target <= {MEDIAN_TARGET}), max {worst:.2f}x (target <= {MAX_TARGET}) over "
        f"{len(rows)} cases, {args.runs} interleaved runs each; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after, {os.cpu_count()} cores"
    )
    return 0 if med <= MEDIAN_TARGET and worst <= MAX_TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())

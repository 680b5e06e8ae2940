#!/usr/bin/env python3
"""The identity scan's CPU time on each layout of bench/big_render_layouts.py, in-process, and
optionally another checkout's scan of the same renders in the same run.

Each layout's chart is rendered once by bare helm; then ``scan_stream`` of each render (and of the
default render rewritten into the layouts helm never prints) is timed with
``time.process_time``, min and median of --reps runs: the part of the plugin's overhead that grows
with a render and depends on its layout, which the load of a shared machine moves least. With
--against DIR (another revision's tree), the same renders are scanned
by DIR's ``cmp_plugin`` in a child process (DIR first on ``PYTHONPATH``), before and after this
tree's, twice, and both columns printed. DIR needs ``cmp_plugin`` and ``driftguard`` only:
``git archive REV cmp_plugin driftguard | tar -x -C DIR``.

Usage: scan_cpu.py [--reps N] [--only LAYOUT[,LAYOUT]] [--against DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import big_render_layouts as layouts  # noqa: E402


def renders(only: set[str]) -> dict[str, str]:
    """Each layout's render by bare helm, and the default one rewritten into helm-less layouts."""
    helm = os.environ.get("DRIFTGUARD_HELM") or str(ROOT / ".tools/bin/helm")
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="scan-cpu-") as tmp:
        for i, (name, template) in enumerate(layouts.LAYOUTS.items()):
            if only and name not in only and not (name == "helm default" and only & VARIANTS.keys()):
                continue
            chart = layouts.make_chart(Path(tmp), f"layout{i}", template)
            argv = [helm, "template", ".", "--name-template", "bench", "--namespace", "bench"]
            out[name] = subprocess.run(argv, cwd=chart, capture_output=True, text=True, check=True).stdout
    if "helm default" in out:
        for name, rewrite in VARIANTS.items():
            if not only or name in only:
                out[name] = rewrite(out["helm default"])
        if only and "helm default" not in only:
            del out["helm default"]
    return out


VARIANTS = {
    "no # Source: lines": lambda text: re.sub(r"\n# Source: [^\n]*", "", text),
    "CRLF line ends": lambda text: text.replace("\n", "\r\n"),
    "--- with trailing blanks": lambda text: text.replace("---\n", "---  \n"),
}


def timed(texts: dict[str, str], reps: int) -> dict[str, tuple[float, float]]:
    """(min, median) ms of CPU per scan of each text, in this process's ``cmp_plugin``."""
    from cmp_plugin.scan import scan_stream

    out = {}
    for name, text in texts.items():
        scan_stream(text)
        took = []
        for _ in range(reps):
            start = time.process_time()
            scan_stream(text)
            took.append((time.process_time() - start) * 1000)
        out[name] = (min(took), statistics.median(took))
    return out


_CHILD = """
import json, statistics, sys, time
import cmp_plugin
from cmp_plugin.scan import scan_stream
assert cmp_plugin.__file__.startswith(sys.argv[1]), cmp_plugin.__file__
out = {}
for name, text in json.load(sys.stdin).items():
    scan_stream(text)
    took = []
    for _ in range(int(sys.argv[2])):
        start = time.process_time()
        scan_stream(text)
        took.append((time.process_time() - start) * 1000)
    out[name] = (min(took), statistics.median(took))
print(json.dumps(out))
"""


def other(tree: Path, texts: dict[str, str], reps: int) -> dict[str, tuple[float, float]]:
    """``timed`` in a child whose ``cmp_plugin`` (and ``driftguard``) is ``tree``'s."""
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tree.resolve()), str(reps)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=tree,
    )
    return {k: (v[0], v[1]) for k, v in json.loads(done.stdout).items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--only", default="", help="comma-separated layout names")
    ap.add_argument("--against", type=Path, help="another checkout whose scan is timed on the same renders")
    args = ap.parse_args()
    texts = renders({s.strip() for s in args.only.split(",") if s.strip()})
    load_before = os.getloadavg()
    rounds: list[tuple[str, dict[str, tuple[float, float]]]] = []
    for _ in range(2 if args.against else 1):
        if args.against:
            rounds.append(("against", other(args.against, texts, args.reps)))
        rounds.append(("this", timed(texts, args.reps)))
    load_after = os.getloadavg()
    width = max(len(n) for n in texts)
    heads = "  ".join(f"{which + ' min/med ms':>22}" for which, _ in rounds)
    print(f"{'layout':<{width}}  {heads}")
    for name in texts:
        cells = "  ".join(f"{r[name][0]:>10.1f} / {r[name][1]:>7.1f}" for _, r in rounds)
        print(f"{name:<{width}}  {cells}")
    print(
        f"{args.reps} scans each; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after, "
        f"{os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""`make corpus`: the project's checks over the development corpora in ../shared/corpus.

The corpora are real inputs the project did not write (real Helm charts and Argo CD's kustomize
bases; Argo CD's own Go test cases as data). They sit beside the project in CI and on the
developers' machines, never in a clone from the project's public home, so `make test` does not
read them: this target does.

What it runs, each printing HOLDS/SHORT per case:
  reference   tests/reference/* are unmodified copies of ../shared/reference/*
  argo-cases  scripts/argo_cases.py (the project's copy of ../shared/corpus/argo-cases/run.py) over
              ../shared/corpus/argo-cases (diff, ignore rules, sync windows, CMP)
  charts      scripts/chart_cases.py ../shared/corpus/charts: object parity of `driftguard-cmp
              generate` with bare helm / kustomize (in-process and forked from the preload
              server: both must agree), objects read as Argo CD's Go YAML reads them
              (the shared run_charts.py reads them with PyYAML, which cannot load the
              prometheus-operator CRDs); no timings: those come from `make bench`
              (bench/real_charts.py), never from here
  implicit-defaults
              every helm case of ../shared/corpus/charts (default values and the first two
              ci/*.yaml, as run_charts.py picks them) rendered through the implicit-defaults guard
              in warn mode: prints per case the candidates the scan proposed, the keys a render
              proved, the warn lines and the proof's renders; a case falls short when it prints
              more than one line, a finding is set by the values file, or bare helm with that one
              key flipped does not remove exactly the kept resources reported

The ratchet: cases known to fall short are listed, each with the issue that fixes it, in
scripts/corpus_known_short.txt (a bare label matches in any suite, ``suite: label`` in that one).
A short case not listed there fails the target (a regression or a
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
import tempfile
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


def bare_helm(chart: Path, values: list[Path]) -> dict[tuple[str, str], bool] | None:
    """(kind, name) -> kept by Argo CD, from bare ``helm template`` read with PyYAML; None if helm fails."""
    import yaml

    from cmp_plugin.kept import is_kept

    helm = os.environ.get("DRIFTGUARD_HELM", "helm")
    argv = [helm, "template", str(chart), "--name-template", chart.name, "--namespace", "rc-apps"]
    for v in values:
        argv += ["--values", str(v)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return None
    objs: dict[tuple[str, str], bool] = {}
    for obj in yaml.load_all(proc.stdout, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if isinstance(obj, dict) and obj.get("kind"):
            meta = obj.get("metadata") or {}
            objs[(str(obj["kind"]), str(meta.get("name")))] = is_kept(meta.get("annotations"))
    return objs


def check_implicit(charts: Path, *, max_ci: int = 2) -> Suite:
    """implicit-defaults on every real chart: each reported key flipped again with bare helm."""
    import json

    from cmp_plugin import pipeline
    from cmp_plugin.argo_env import AppEnv, parse_parameters
    from cmp_plugin.guards.implicit_defaults import SCAN_VERDICTS, ImplicitDefaultsGuard
    from cmp_plugin.helmchart import chart_values as cv
    from cmp_plugin.helmchart.implicit import CANDIDATE, NOTE, by_key
    from cmp_plugin.settings import CmpSettings
    from driftguard.errors import DriftguardError

    suite = Suite("implicit-defaults")
    settings = CmpSettings.from_env()
    print(f"{'case':62} {'candidates':>10} {'proven':>6} {'lines':>5} {'renders':>7}")
    for chart in sorted(p for p in charts.iterdir() if (p / "Chart.yaml").is_file()):
        ci = sorted((chart / "ci").glob("*.yaml")) if (chart / "ci").is_dir() else []
        for values in [None, *(f"ci/{f.name}" for f in ci[:max_ci])]:
            label = f"{chart.name}[{values or 'default'}]"
            params, explicit = parse_parameters({}, {"values-files": [values]} if values else {})
            env = AppEnv(app_name=chart.name, app_namespace="rc-apps", params=params, explicit=explicit)
            try:
                outcome = pipeline.run(
                    chart, repo_root=charts, env=env, settings=settings, guards=(ImplicitDefaultsGuard(),)
                )
            except DriftguardError as exc:
                suite.short[label] = f"does not render: {str(exc).splitlines()[0][:160]}"
                continue
            switches = outcome.notes.get(NOTE)
            switches = switches if isinstance(switches, list) else []
            found = by_key(f for f in switches if f.is_finding)
            candidates = {f.gate.key for f in switches if f.verdict not in SCAN_VERDICTS}
            supplied = [cv.load_values((chart / values).read_text(), values)] if values else []
            lines = [w for w in outcome.warnings if "chart default" in w or "implicit" in w]
            given = [chart / values] if values else []
            base = bare_helm(chart, given)
            bad = []
            if any(f.verdict == CANDIDATE for f in switches):
                bad.append("a candidate was left without a verdict")
            with tempfile.TemporaryDirectory(prefix="corpus-flip-") as tmp:
                for key, fs in found.items():
                    f = fs[0]
                    if any(cv.lookup(d, key)[0] for d in supplied):
                        bad.append(f"{key}: set by {values}")
                        continue
                    doc: dict[str, object] = {}
                    node = doc
                    parts = key.split(".")
                    for part in parts[:-1]:
                        node = node.setdefault(part, {})  # type: ignore[assignment]
                    node[parts[-1]] = f.flip
                    flip = Path(tmp) / "flip.json"
                    flip.write_text(json.dumps(doc))
                    flipped = bare_helm(chart, [*given, flip])
                    if base is None or flipped is None:
                        bad.append(f"{key}: bare helm fails with it flipped")
                        continue
                    gone = tuple(
                        sorted(f"{k} {n}" for (k, n), kept in base.items() if kept and (k, n) not in flipped)
                    )
                    if gone != f.rendered:
                        bad.append(f"{key}: bare helm removes {len(gone)}, reported {len(f.rendered)}")
            renders = outcome.notes.get(NOTE + "-renders", 0)
            print(f"{label:62} {len(candidates):10} {len(found):6} {len(lines):5} {renders:7}")
            if len(lines) > 1:
                bad.append(f"{len(lines)} implicit-defaults lines > 1")
            if bad:
                suite.short[label] = "; ".join(bad[:3])
            else:
                suite.holds.append(label)
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
            [sys.executable, str(ROOT / "scripts" / "argo_cases.py"), str(corpus / "argo-cases")],
            env,
        ),
        run_suite(
            "charts",
            # parity only (timings belong to `make bench`)
            [sys.executable, str(ROOT / "scripts" / "chart_cases.py"), str(corpus / "charts")],
            env,
        ),
    ]
    os.environ["PATH"] = env["PATH"]
    os.environ.setdefault("DRIFTGUARD_HELM", str(ROOT / ".tools" / "bin" / "helm"))
    with tempfile.TemporaryDirectory(prefix="corpus-cache-") as cache:
        os.environ["DRIFTGUARD_CMP_CACHE_DIR"] = cache
        suites.append(check_implicit(corpus / "charts"))
    known = known_short()
    seen: set[str] = set()
    failed = False

    def listed(suite: Suite, label: str) -> str:
        """The ratchet entry for a case: ``suite: label`` for one suite, or a bare label for any."""
        qualified = f"{suite.name}: {label}"
        return qualified if qualified in known else label if label in known else ""

    for suite in suites:
        for label, detail in sorted(suite.short.items()):
            entry = listed(suite, label)
            if entry:
                seen.add(entry)
                print(f"KNOWN {suite.name}: {label} ({known[entry]})")
            else:
                failed = True
                print(f"SHORT {suite.name}: {label} -- {detail}")
        for label in suite.holds:
            entry = listed(suite, label)
            if entry:
                seen.add(entry)
                failed = True
                print(f"FIXED {suite.name}: {label} holds now: take it off scripts/corpus_known_short.txt")
    for label in sorted(set(known) - seen):
        failed = True
        print(f"STALE {label}: listed in scripts/corpus_known_short.txt but no runner reported it")
    tally = ", ".join(
        f"{s.name} {len(s.holds)}/{len(s.holds) + len(s.short)} hold"
        + (f" ({sum(1 for x in s.short if listed(s, x))} known short)" if s.short else "")
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

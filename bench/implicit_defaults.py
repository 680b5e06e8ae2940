#!/usr/bin/env python3
"""Cost of the implicit-defaults guard, same run: on the real charts when they are there, else synthetic.

With ../shared/corpus/charts beside the project (or --corpus DIR): every helm case (default values
and the first two ci/*.yaml) runs ``driftguard-cmp generate`` with Argo CD's environment, warn mode
and off interleaved (--runs, default 7), and prints per case the keys found, the implicit-defaults
lines printed, and the wall time the guard adds (median on - median off, and its share of the
median off). The analysis starts while helm renders, so on two free cores it adds little.

Without the corpus: a synthetic chart of 240 templates, 120 gating keys (`if .Values.svcN.enabled`,
nested `with`, helpers reached by include), an environment values file that sets half of them;
the analysis is timed alone against the bare `helm template`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import chart_cases  # noqa: E402

from cmp_plugin.argo_env import AppEnv, parse_parameters  # noqa: E402
from cmp_plugin.helmchart.implicit import analyse  # noqa: E402
from cmp_plugin.renderers.base import RenderJob  # noqa: E402
from cmp_plugin.settings import CmpSettings  # noqa: E402

HELM = os.environ.get("DRIFTGUARD_HELM", str(ROOT / ".tools/bin/helm"))
TEMPLATES, KEYS = 240, 120


def make_chart(root: Path) -> Path:
    chart = root / "big"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: big\nversion: 1.0.0\n")
    values = []
    helpers = []
    for k in range(KEYS):
        values.append(f"svc{k}:\n  enabled: true\n  monitor:\n    enabled: {str(k % 2 == 0).lower()}\n")
        helpers.append(
            f'{{{{- define "big.mon{k}" -}}}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mon-{k}\n{{{{- end -}}}}\n'
        )
    (chart / "values.yaml").write_text("".join(values))
    (chart / "templates" / "_helpers.tpl").write_text("".join(helpers))
    for t in range(TEMPLATES - 1):
        k = t % KEYS
        if t < KEYS:
            body = f"{{{{- if .Values.svc{k}.enabled }}}}\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc-{k}\nspec:\n  replicas: 1\n{{{{- end }}}}\n"
        else:
            body = f'{{{{- with .Values.svc{k} }}}}\n{{{{- if .monitor.enabled }}}}\n{{{{ include "big.mon{k}" $ }}}}\n{{{{- end }}}}\n{{{{- end }}}}\n'
        (chart / "templates" / f"t{t}.yaml").write_text(body)
    env_values = root / "prod.yaml"
    env_values.write_text("".join(f"svc{k}:\n  enabled: true\n" for k in range(0, KEYS, 2)))
    return chart


def corpus_cases(charts: Path) -> list[tuple[str, Path, str | None]]:
    out: list[tuple[str, Path, str | None]] = []
    for chart in sorted(p for p in charts.iterdir() if (p / "Chart.yaml").is_file()):
        ci = sorted((chart / "ci").glob("*.yaml")) if (chart / "ci").is_dir() else []
        for values in [None, *(f"ci/{f.name}" for f in ci[:2])]:
            out.append((f"{chart.name}[{values or 'default'}]", chart, values))
    return out


STAT = "median"
"""How the runs of one case are summed up (--stat): median, or min on a busy machine."""
ONLY: frozenset[str] = frozenset()
"""Chart names to run (--only), all when empty."""
PRELOAD = "on"
"""DRIFTGUARD_CMP_PRELOAD for the renders (--preload): on, as the sidecar manifests ship it."""


def generate(chart: Path, charts: Path, values: str | None, mode: str, cache: str) -> tuple[float, int, str]:
    params: list[dict[str, object]] = [{"name": "implicit-defaults", "string": mode}]
    if values:
        params.append({"name": "values-files", "array": [values]})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOCD_", "DRIFTGUARD_CMP_"))}
    env.update(
        ARGOCD_APP_NAME=chart.name,
        ARGOCD_APP_NAMESPACE="rc-apps",
        ARGOCD_APP_SOURCE_PATH=str(chart.relative_to(charts)),
        ARGOCD_APP_PARAMETERS=json.dumps(params),
        KUBE_VERSION="1.32.3",
        DRIFTGUARD_CMP_CACHE_DIR=cache,
        DRIFTGUARD_CMP_PRELOAD=PRELOAD,
    )
    cmp = str(Path(sys.executable).parent / "driftguard-cmp")
    start = time.perf_counter()
    proc = subprocess.run([cmp, "generate"], cwd=chart, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    return took, proc.returncode, proc.stderr


def in_process(chart: Path, values: str | None, cache: Path) -> tuple[float, float, float]:
    """CPU ms of the analysis, immune to other load: prepare cold, prepare warm (cached), classify."""
    from cmp_plugin.helmchart.chart_values import load_values
    from cmp_plugin.helmchart.implicit import classify, prepare
    from cmp_plugin.scan import scan_stream

    supplied = [load_values((chart / values).read_text(), values)] if values else []
    argv = [HELM, "template", ".", "--name-template", chart.name] + (["--values", values] if values else [])
    docs = scan_stream(subprocess.run(argv, cwd=chart, capture_output=True, text=True, check=True).stdout)
    t = time.process_time()
    prepare(chart, supplied, cache_dir=cache)
    cold = time.process_time() - t
    warm = []
    for _ in range(3):
        t = time.process_time()
        prep = prepare(chart, supplied, cache_dir=cache)
        warm.append(time.process_time() - t)
    t = time.process_time()
    classify(prep, docs)
    join = time.process_time() - t
    return cold * 1000, min(warm) * 1000, join * 1000


def proof_counts(
    chart: Path, charts: Path, values: str | None, cache: Path
) -> tuple[int, int, int, int, int]:
    """(candidates, proven keys, renders of the whole proof, renders of a cold ``generate``, keys it
    left pending), in-process: ``render`` (the whole proof) and a hot render as ``generate`` runs it."""
    from cmp_plugin import pipeline
    from cmp_plugin.guards.implicit_defaults import NOTE, SCAN_VERDICTS, ImplicitDefaultsGuard
    from cmp_plugin.helmchart.implicit import PENDING

    params, explicit = parse_parameters({}, {"values-files": [values]} if values else {})
    env = AppEnv(app_name=chart.name, app_namespace="rc-apps", params=params, explicit=explicit)
    counts = []
    for hot in (True, False):
        os.environ["DRIFTGUARD_CMP_CACHE_DIR"] = str(cache / ("hot" if hot else "whole"))
        outcome = pipeline.run(
            chart,
            repo_root=charts,
            env=env,
            settings=CmpSettings.from_env(),
            guards=(ImplicitDefaultsGuard(),),
            hot=hot,
        )
        switches = outcome.notes[NOTE]
        assert isinstance(switches, list)
        candidates = {f.gate.key for f in switches if f.verdict not in SCAN_VERDICTS}
        proven = {f.gate.key for f in switches if f.is_finding}
        pending = {f.gate.key for f in switches if f.verdict == PENDING}
        counts.append((len(candidates), len(proven), int(outcome.notes[NOTE + "-renders"]), len(pending)))  # type: ignore[call-overload]
    (_, _, cold_renders, left), (cand, keys, renders, _) = counts
    return cand, keys, renders, cold_renders, left


def warm_up(chart: Path, charts: Path, values: str | None, cache: str) -> None:
    """generate until it has proven every candidate (each render goes on where the last stopped)."""
    for _ in range(64):
        _, _, err = generate(chart, charts, values, "warn", cache)
        if "being proven" not in err:
            return


def drop_proofs(cache: str) -> None:
    for entry in [*Path(cache).glob("proof-*.json"), *Path(cache).glob("verdicts-*.json")]:
        entry.unlink()


def on_corpus(charts: Path, runs: int) -> int:
    print(
        "per case: candidates the scan proposed, keys a render proved, renders of the whole proof (render),"
    )
    print("the lines generate printed (warn), and the wall time `driftguard-cmp generate` adds over")
    print(
        "implicit-defaults=off: cold (no proof in the cache: the first render of a chart version) and warm;"
    )
    print(
        "--stat (median or min) of --runs interleaved runs; `pending` = keys generate left for the next render (cold)"
    )
    print("renders: of the whole proof (render) / of a cold generate (hot, in-process); `pending` = keys the")
    print("cold generate left for the next render (in-process, and the most over the timed cold runs)")
    print(
        f"{'case':52} {'cand':>4} {'proven':>6} {'renders':>9} {'lines':>5} {'off ms':>7}"
        f" {'cold +ms':>8} {'warm +ms':>8} {'pending':>7}"
    )
    for label, chart, values in corpus_cases(charts):
        if ONLY and chart.name not in ONLY:
            continue
        with tempfile.TemporaryDirectory() as cache:
            _, rc, err = generate(chart, charts, values, "warn", cache)
            if rc != 0:
                print(
                    f"{label:52} does not render: {err.strip().splitlines()[0][:60] if err.strip() else rc}"
                )
                continue
            if PRELOAD == "on":  # the first render started the preload server: wait for it
                chart_cases.wait_for_preload(Path(cache))
            warm_up(chart, charts, values, cache)
            off, cold, warm, pending = [], [], [], []
            lines = 0
            for i in range(runs):
                order = ("off", "cold", "warm") if i % 2 == 0 else ("warm", "cold", "off")
                for kind in order:
                    if kind == "cold":
                        drop_proofs(cache)
                    took, _, err = generate(chart, charts, values, "off" if kind == "off" else "warn", cache)
                    if kind == "cold":
                        mark = [
                            x for x in err.splitlines() if "being proven" in x or "more being proven" in x
                        ]
                        pending.append(
                            int(mark[0].split("(")[1].split()[0])
                            if mark and "more being" in mark[0]
                            else len(mark)
                        )
                        lines = max(lines, len([x for x in err.splitlines() if "chart default" in x]))
                        warm_up(chart, charts, values, cache)  # the "warm" runs find the whole proof
                    {"off": off, "cold": cold, "warm": warm}[kind].append(took * 1000)
            cand, proven, renders, cold_renders, left = proof_counts(
                chart, charts, values, Path(cache) / "counts"
            )
            # the last render's background proof writes into the cache when it ends: not under the removal
            chart_cases.wait_for_background_proofs(Path(cache))
        stat = min if STAT == "min" else statistics.median
        m_off = stat(off)
        print(
            f"{label:52} {cand:4} {proven:6} {f'{renders}/{cold_renders}':>9} {lines:5} {m_off:7.0f}"
            f" {stat(cold) - m_off:+8.0f} {stat(warm) - m_off:+8.0f}"
            f" {f'{left}/{max(pending)}':>7}"
        )
    return 0


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus" / "charts")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument(
        "--preload", choices=("on", "off"), default="on", help="DRIFTGUARD_CMP_PRELOAD (default on)"
    )
    ap.add_argument("--stat", choices=("median", "min"), default="median", help="how runs are summed up")
    ap.add_argument("--only", default="", help="chart names, comma-separated (default: every chart)")
    args = ap.parse_args()
    chart_cases.compile_bytecode()
    global ONLY, PRELOAD, STAT  # a benchmark's switches
    PRELOAD, STAT = args.preload, args.stat
    ONLY = frozenset(n for n in args.only.split(",") if n)
    if args.corpus.is_dir():
        return on_corpus(args.corpus, args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        chart = make_chart(root)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": tmp,
            "HELM_CACHE_HOME": tmp,
            "HELM_CONFIG_HOME": tmp,
            "HELM_DATA_HOME": tmp,
        }
        argv = [HELM, "template", ".", "--values", "../prod.yaml"]
        params, explicit = parse_parameters({}, {"values-files": ["../prod.yaml"]})
        job = RenderJob(
            chart, root, AppEnv(app_name="big", params=params, explicit=explicit), CmpSettings(), root
        )
        bare, guard = [], []
        findings = analyse(job)
        for _ in range(7):
            start = time.perf_counter()
            subprocess.run(argv, cwd=chart, env=env, capture_output=True, check=True)
            bare.append(time.perf_counter() - start)
            start = time.perf_counter()
            analyse(job)
            guard.append(time.perf_counter() - start)
        b, g = statistics.median(bare), statistics.median(guard)
        gates = {f.gate.key for f in findings}
        implicit = sum(1 for f in findings if not f.explicit)
        print(
            f"chart: {TEMPLATES} templates, {len(gates)} gating keys, {implicit} not set by this environment"
            " (no render output here: every one counts as rendering; the scan is not cached)"
        )
        print(
            f"bare helm template: {b * 1000:.1f} ms; implicit-defaults analysis: {g * 1000:.1f} ms; added {g / b:.0%} of the bare render"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Object parity of `driftguard-cmp generate` with bare helm / kustomize on a corpus of real charts.

The project's own runner for ../shared/corpus/charts (`make corpus` runs it; bench/real_charts.py
imports it for timings). It finds the cases as ../shared/corpus/run_charts.py does (a chart's
default values, then up to --max-ci of its ci/*.yaml; each path of a kustomize-*/KUSTOMIZE_PATHS),
runs both with Argo CD's environment and native flags (util/helm/cmd.go: helm template . --name-
template --namespace --kube-version [--values]... --api-versions... --include-crds; kustomize
build .), and compares the objects order-insensitively. Objects are read with driftguard's
loader, i.e. as Argo CD's Go YAML reads them (driftguard/goyaml.py): the shared runner's PyYAML
cannot read the prometheus-operator CRDs at all.

One line per case, ``HOLDS <case>: ...`` or ``SHORT <case>: ... -- detail``, then a tally.
A case falls short on a parity mismatch, a crash, driftguard failing where the bare tool renders
(refusals included), the bare tool failing where driftguard exits 0, or both failing without
driftguard showing the tool's error, or the preloaded render differing from the in-process one.
driftguard runs as the sidecar manifests ship it (DRIFTGUARD_CMP_PRELOAD=on): each case renders
twice, first in-process (which starts the preload server), then forked from that server; both must
give the same exit code, output and stderr. Exit 1 when any case falls short.

Usage: chart_cases.py CORPUS_DIR [--only NAME[,NAME]] [--max-ci N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from driftguard.errors import ManifestError  # noqa: E402
from driftguard.manifests import load_stream  # noqa: E402

KUBE_VERSION = "1.32.3"
# what a 1.32 cluster with cert-manager, prometheus-operator, Argo CD and the Gateway API serves
API_VERSIONS = [
    "v1", "admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "apiregistration.k8s.io/v1",
    "apps/v1", "authentication.k8s.io/v1", "authorization.k8s.io/v1", "autoscaling/v1", "autoscaling/v2",
    "batch/v1", "certificates.k8s.io/v1", "coordination.k8s.io/v1", "discovery.k8s.io/v1",
    "events.k8s.io/v1", "flowcontrol.apiserver.k8s.io/v1", "networking.k8s.io/v1", "node.k8s.io/v1",
    "policy/v1", "rbac.authorization.k8s.io/v1", "resource.k8s.io/v1beta1", "scheduling.k8s.io/v1",
    "storage.k8s.io/v1", "metrics.k8s.io/v1beta1", "snapshot.storage.k8s.io/v1",
    "cert-manager.io/v1", "acme.cert-manager.io/v1", "monitoring.coreos.com/v1",
    "monitoring.coreos.com/v1alpha1", "argoproj.io/v1alpha1", "gateway.networking.k8s.io/v1",
    "gateway.networking.k8s.io/v1beta1", "gateway.networking.k8s.io/v1alpha2",
    "apps/v1/Deployment", "apps/v1/StatefulSet", "apps/v1/DaemonSet", "batch/v1/Job", "batch/v1/CronJob",
    "policy/v1/PodDisruptionBudget", "autoscaling/v2/HorizontalPodAutoscaler",
    "networking.k8s.io/v1/Ingress", "monitoring.coreos.com/v1/ServiceMonitor",
    "monitoring.coreos.com/v1/PodMonitor", "monitoring.coreos.com/v1/PrometheusRule",
]  # fmt: skip
NAMESPACE = "rc-apps"
REVISION = "0123456789abcdef0123456789abcdef01234567"


class Case(NamedTuple):
    name: str
    kind: str  # helm | kustomize
    app_dir: Path
    repo_root: Path
    values: str | None

    @property
    def app_name(self) -> str:
        return self.app_dir.name[:40].strip("-").replace("+", "").replace(".", "-").lower() or "app"


def find_cases(corpus: Path, *, max_ci: int = 2, only: frozenset[str] = frozenset()) -> list[Case]:
    cases = []
    for d in sorted(p for p in corpus.iterdir() if p.is_dir()):
        if only and d.name not in only:
            continue
        if (d / "Chart.yaml").is_file():
            cases.append(Case(f"{d.name}[default]", "helm", d, corpus, None))
            ci = sorted((d / "ci").glob("*.yaml")) if (d / "ci").is_dir() else []
            for f in ci[:max_ci]:
                cases.append(Case(f"{d.name}[ci/{f.name}]", "helm", d, corpus, f"ci/{f.name}"))
        elif (d / "KUSTOMIZE_PATHS").is_file():
            for raw in (d / "KUSTOMIZE_PATHS").read_text().splitlines():
                line = raw.strip()
                if line and not line.startswith("#"):
                    cases.append(Case(f"{d.name}[{line}]", "kustomize", d / line, corpus, None))
    return cases


def tools() -> dict[str, str]:
    found = {}
    for name in ("driftguard-cmp", "helm"):
        path = shutil.which(name)
        if not path:
            sys.exit(f"chart_cases: {name} is not on PATH")
        found[name] = str(Path(path).resolve())
    for name in ("kustomize", "kubectl"):
        path = shutil.which(name)
        if path:
            found[name] = str(Path(path).resolve())
            break
    return found


def bare_argv(case: Case, t: dict[str, str], *, extra: list[str] | None = None) -> list[str]:
    """The bare tool with Argo CD's native flags (``extra``: more helm flags, as a parameter adds them)."""
    if case.kind == "helm":
        argv = [t["helm"], "template", ".", "--name-template", case.app_name, "--namespace", NAMESPACE]
        argv += ["--kube-version", KUBE_VERSION]
        if case.values:
            argv += ["--values", case.values]
        for api in API_VERSIONS:
            argv += ["--api-versions", api]
        return [*argv, "--include-crds", *(extra or [])]
    if "kustomize" in t:
        return [t["kustomize"], "build", "."]
    if "kubectl" in t:
        return [t["kubectl"], "kustomize", "."]
    sys.exit("chart_cases: neither kustomize nor kubectl on PATH for a kustomize case")


def dg_env(case: Case, cache: Path, *, params: list[dict[str, Any]] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOCD_", "PARAM_", "DRIFTGUARD_"))}
    env.update(
        ARGOCD_APP_NAME=case.app_name,
        ARGOCD_APP_NAMESPACE=NAMESPACE,
        ARGOCD_APP_REVISION=REVISION,
        ARGOCD_APP_SOURCE_PATH=str(case.app_dir.relative_to(case.repo_root)),
        ARGOCD_APP_SOURCE_REPO_URL="https://git.example.com/corpus/charts.git",
        KUBE_VERSION=KUBE_VERSION,
        KUBE_API_VERSIONS=",".join(API_VERSIONS),
        DRIFTGUARD_CMP_CACHE_DIR=str(cache),
    )
    items = list(params or [])
    if case.values:
        items.append({"name": "values-files", "array": [case.values]})
    env["ARGOCD_APP_PARAMETERS"] = json.dumps(items) if items else "null"  # null: what Argo CD sends
    return env


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    start = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - start


def objects(text: str) -> list[str]:
    """Every object of a stream as canonical JSON, read as Argo CD reads YAML."""
    return [
        json.dumps(d.obj, sort_keys=True) for d in load_stream(text, source="render", require_identity=False)
    ]


def ident(obj_json: str) -> str:
    o = json.loads(obj_json)
    m = o.get("metadata") or {}
    return f"{o.get('kind')}/{m.get('namespace', '')}/{m.get('name')}"


def parity(a: list[str], b: list[str], b2: list[str]) -> tuple[str, set[str]]:
    """('' when the multisets match, else what differs; the identities whose content is random).

    Objects whose content differs between two bare renders (randAlphaNum passwords, genCA
    certificates and the checksums over them) are compared by identity only.
    """
    unstable = {ident(x) for x in set(b) ^ set(b2)}
    if unstable:
        a = [ident(x) if ident(x) in unstable else x for x in a]
        b = [ident(x) if ident(x) in unstable else x for x in b]
    ca, cb = Counter(a), Counter(b)
    if ca == cb:
        return "", unstable
    only_dg = sorted(ident(x) for x in (ca - cb).elements())
    only_bare = sorted(ident(x) for x in (cb - ca).elements())
    return (
        f"{len(a)} vs {len(b)} objects; only in driftguard: {only_dg[:5]}; only in bare: {only_bare[:5]}",
        unstable,
    )


def wait_for_preload(cache: Path, seconds: float = 5.0) -> bool:
    """Whether the preload server a first render started listens in ``cache`` within ``seconds``."""
    from cmp_plugin.preload.protocol import SOCKET_NAME

    deadline = time.monotonic() + seconds
    while not (cache / SOCKET_NAME).exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_for_background_proofs(cache: Path, seconds: float = 300.0) -> None:
    """Until no implicit-defaults proof left by a render runs in ``cache`` (cmp_plugin/proof_background.py).

    Timed beside it, a run measures that proof's helm too; and a cache directory removed under it
    fails its removal when the proof writes its verdicts there at the end.
    """
    from cmp_plugin.proof_background import LOCKS

    deadline = time.monotonic() + seconds
    while list((cache / LOCKS).glob("*.lock")) and time.monotonic() < deadline:
        time.sleep(0.1)


def compile_bytecode() -> None:
    """Bytecode for the project's packages, as the image has it (Dockerfile: compileall).

    With PYTHONDONTWRITEBYTECODE set (the image sets it, some machines do) a module changed since
    its .pyc was written is compiled from source by every process that imports it: ~5 ms a module,
    a cost the sidecar never pays. The benchmarks call this before they time anything.
    """
    import compileall

    for package in ("driftguard", "cmp_plugin", "notifier", "analysis_provider"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


def check(case: Case, t: dict[str, str]) -> dict[str, Any]:
    """Parity of one case: a dict with ``short`` when it falls short, ``resources`` when it renders."""
    res: dict[str, Any] = {"case": case.name}
    cache = Path(tempfile.mkdtemp(prefix="chart-cases-"))
    try:
        brc, bout, berr, _ = run(bare_argv(case, t), case.app_dir)
        env = {**dg_env(case, cache), "DRIFTGUARD_CMP_PRELOAD": "on"}  # as the sidecar manifests ship
        drc, dout, derr, _ = run([t["driftguard-cmp"], "generate"], case.app_dir, env)
        # the first render started the preload server; the same render forked from it must be identical
        if not wait_for_preload(cache):
            res["short"] = "the preload server did not start within 5 s"
            return res
        again = run([t["driftguard-cmp"], "generate"], case.app_dir, env)
        if (again[0], again[1]) != (drc, dout) or _stable(again[2]) != _stable(derr):
            res["short"] = f"the preloaded render differs from the in-process one (exit {again[0]} vs {drc})"
            return res
        lines = derr.splitlines()
        res["warnings"] = [x for x in lines if x.startswith("driftguard: warning")]
        if "Traceback (most recent call last)" in derr or drc < 0:
            res["short"] = "crash: " + " | ".join(lines[-3:])
        elif brc != 0:
            first = next((x for x in berr.splitlines() if x.startswith("Error")), berr.strip()[:200])
            res["resources"] = 0
            if drc == 0:
                res["short"] = f"bare tool fails ({first}) but driftguard-cmp exits 0"
            elif first[:60] not in derr:
                res["short"] = f"both fail but driftguard-cmp does not show the tool's error: {lines[:2]}"
            else:
                res["both_fail"] = first
        elif drc != 0:
            res["short"] = f"driftguard-cmp exit {drc} where the bare tool renders: {' | '.join(lines[:3])}"
        else:
            try:
                a, b = objects(dout), objects(bout)
                b2 = objects(run(bare_argv(case, t), case.app_dir)[1])
            except ManifestError as exc:
                res["short"] = f"the render cannot be read as Argo CD reads YAML: {exc}"
                return res
            res["resources"] = len(b)
            diff, unstable = parity(a, b, b2)
            res["unstable"] = len(unstable)
            if diff:
                res["short"] = f"parity: {diff}"
        return res
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _stable(stderr: str) -> list[str]:
    """stderr without what differs between any two renders: the first one's missing baseline, scratch
    names, and the implicit-defaults note, which grows as its proof converges over renders of the same
    content (generate proves for about one render's time, then carries on at the next render:
    docs/architecture.md, flip_proof.py; its lines are checked by the implicit-defaults suite instead)."""
    import re

    scratch = re.compile(r"driftguard-[0-9]+-[0-9a-f]{8}")
    return [
        scratch.sub("driftguard-SCRATCH", x)
        for x in stderr.splitlines()
        if "shrink guard skipped" not in x
        and not (x.startswith("driftguard: note:") and "chart defaults" in x)
    ]


def summary(res: dict[str, Any]) -> str:
    text = f"{res['case']}: {res.get('resources', '?')} resources, {len(res.get('warnings', []))} warnings"
    if "both_fail" in res:
        text += f", both fail: {res['both_fail']}"
    if res.get("unstable"):
        text += f", {res['unstable']} nondeterministic objects compared by identity"
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--max-ci", type=int, default=2)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    t = tools()
    cases = find_cases(
        args.corpus.resolve(), max_ci=args.max_ci, only=frozenset(filter(None, args.only.split(",")))
    )
    if not cases:
        sys.exit(f"chart_cases: no cases under {args.corpus}")
    short = 0
    for case in cases:
        try:
            res = check(case, t)
        except subprocess.TimeoutExpired as exc:
            res = {"case": case.name, "short": f"hang: {exc.cmd[:2]} ran over {exc.timeout}s"}
        if "short" in res:
            short += 1
            print(f"SHORT {summary(res)} -- {res['short']}", flush=True)
        else:
            print(f"HOLDS {summary(res)}", flush=True)
    print(f"{len(cases) - short} hold, {short} short of {len(cases)} cases")
    return 1 if short else 0


if __name__ == "__main__":
    raise SystemExit(main())

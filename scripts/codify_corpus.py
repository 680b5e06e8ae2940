"""Try ``driftguard-cmp codify`` on real charts: five live changes per chart, each proven or refused.

    .venv/bin/python scripts/codify_corpus.py ../shared/corpus/charts [CHART ...]

Each chart is copied into a scratch git checkout (``charts/<chart>``) with an environment values
file (``envs/<chart>.yaml``: the chart's first ``ci/*.yaml``, else empty), as an Application would
name it. On the first Deployment (else StatefulSet, DaemonSet) of the render, container 0, it asks
codify to reproduce: replicas + 1, a new image tag, a memory limit, the first env value changed,
a new pod annotation. Prints one line per field: PROVEN with the edit, REFUSED with why, and the
command a person would run; exits 0 (a refusal is a finding, not a failure), 2 on a crash.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.repotools.codify import codify
from cmp_plugin.repotools.codify_spec import Change
from cmp_plugin.repotools.codify_workspace import Target, Workspace
from cmp_plugin.settings import CmpSettings
from driftguard.diff import escape

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")


def fields(obj: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(label, pointer, live value) of the five changes tried on a workload; value None: not tried."""
    spec = obj.get("spec") or {}
    pod = ((spec.get("template") or {}).get("spec")) or {}
    container = (pod.get("containers") or [{}])[0]
    c0 = "/spec/template/spec/containers/0"
    out: list[tuple[str, str, Any]] = []
    replicas = spec.get("replicas")
    out.append(("replicas", "/spec/replicas", replicas + 1 if isinstance(replicas, int) else None))
    image = str(container.get("image") or "")
    name, _, _tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
    out.append(
        ("image tag", f"{c0}/image", None if "@" in image or not image else f"{name or image}:9.9.9-codify")
    )
    out.append(("memory limit", f"{c0}/resources/limits/memory", "999Mi"))
    env = [(i, e) for i, e in enumerate(container.get("env") or []) if isinstance(e.get("value"), str)]
    out.append(
        ("env value", f"{c0}/env/{env[0][0]}/value", env[0][1]["value"] + "-codify")
        if env
        else ("env value", "", None)
    )
    out.append(("annotation", "/spec/template/metadata/annotations/" + escape("example.com/codify"), "kept"))
    return out


def trial(src: Path, chart: str, scratch: Path, settings: CmpSettings) -> list[tuple[str, str, str]]:
    """(field, PROVEN/REFUSED/NOT TRIED, detail) for one chart."""
    root = scratch / chart
    shutil.copytree(src, root / "charts" / chart, symlinks=True)
    ci = sorted((src / "ci").glob("*.yaml")) if (src / "ci").is_dir() else []
    (root / "envs").mkdir()
    (root / "envs" / f"{chart}.yaml").write_text(ci[0].read_text() if ci else "{}\n")
    # committed, as a GitOps repository holds its vendored charts (even where a .gitignore matches)
    git = ["git", "-C", str(root), "-c", "user.name=codify", "-c", "user.email=codify@example.com"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A", "-f"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "corpus"], check=True)
    params, explicit = parse_parameters({}, {"values-files": [f"../../envs/{chart}.yaml"]})
    env = AppEnv(app_name=chart, app_namespace="apps", params=params, explicit=explicit)
    target = Target((root / "charts" / chart).resolve(), root.resolve(), env)
    ws = Workspace(target, settings)
    try:
        before = ws.render()
    finally:
        ws.close()
    workloads = sorted(
        (k for k in before.objects if k.kind in WORKLOADS), key=lambda k: (WORKLOADS.index(k.kind), k.name)
    )
    if not workloads:
        return [("all", "NOT TRIED", "no Deployment, StatefulSet or DaemonSet in the render")]
    key = workloads[0]
    rows = []
    for label, pointer, value in fields(before.objects[key]):
        if value is None:
            rows.append((label, "NOT TRIED", f"{key}: the render has no such field"))
            continue
        change = Change(key.kind, key.namespace, key.name, pointer, value)
        out = codify(target, [change], settings=settings)
        cmd = (
            f"driftguard-cmp codify charts/{chart} --values-file ../../envs/{chart}.yaml "
            f"--app-name {chart} --namespace apps --change '{change}'"
        )
        if out.refused:
            rows.append((label, "REFUSED", "; ".join(out.refused)[:400] + f"\n      $ {cmd}"))
        else:
            rows.append((label, "PROVEN", "; ".join(out.how) + f"\n      $ {cmd}"))
    return rows


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    base = Path(argv[0])
    charts = argv[1:] or sorted(p.name for p in base.iterdir() if (p / "Chart.yaml").is_file())
    settings = CmpSettings.from_env()
    tally: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="codify-corpus-") as tmp:
        for chart in charts:
            print(f"== {chart}")
            try:
                rows = trial(base / chart, chart, Path(tmp), settings)
            except Exception as exc:
                print(f"  CRASH     {type(exc).__name__}: {str(exc)[:300]}")
                tally["CRASH"] = tally.get("CRASH", 0) + 1
                continue
            for label, verdict, detail in rows:
                tally[verdict] = tally.get(verdict, 0) + 1
                print(f"  {verdict:9} {label}: {detail}")
    print("tally: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    return 2 if "CRASH" in tally else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

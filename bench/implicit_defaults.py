#!/usr/bin/env python3
"""Cost of the implicit-defaults guard on a large chart, relative to the bare render, same run.

The chart: 240 templates, 120 gating keys (`if .Values.svcN.enabled`, nested `with`, helpers
reached by include), one environment values file that sets half of them.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cmp_plugin.argo_env import AppEnv, parse_parameters  # noqa: E402
from cmp_plugin.guards.implicit_defaults import analyse  # noqa: E402
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


def main() -> int:
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
            f"chart: {TEMPLATES} templates, {len(gates)} gating keys, {implicit} implicit for this environment"
        )
        print(
            f"bare helm template: {b * 1000:.1f} ms; implicit-defaults analysis: {g * 1000:.1f} ms; added {g / b:.0%} of the bare render"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

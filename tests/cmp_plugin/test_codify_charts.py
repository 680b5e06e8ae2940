"""codify on real charts the project did not write (tests/data/charts, see SOURCES.md).

Five live changes on each chart's first workload (scripts/codify_corpus.py: replicas + 1, a new
image tag, a memory limit, an env value, a pod annotation), each proven by rendering or refused
with why. `scripts/codify_corpus.py`, given the development corpus's charts folder, runs the same on the whole corpus.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from cmp_plugin.settings import CmpSettings

from .conftest import ROOT


def corpus_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("codify_corpus", ROOT / "scripts/codify_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["codify_corpus"] = module
    spec.loader.exec_module(module)
    return module


EXPECTED = {
    # metrics-server's tag defaults to v{{ .Chart.AppVersion }} in a helper: image.tag is the key
    "metrics-server": {
        "replicas": ("PROVEN", "`replicas`"),
        "image tag": ("PROVEN", "`image.tag`"),
        "memory limit": ("PROVEN", "`resources.limits.memory`"),
        "env value": ("NOT TRIED", "no such field"),
        "annotation": ("PROVEN", "`podAnnotations.example.com/codify`"),
    },
    # the first workload is the kube-state-metrics subchart's: its keys live under its name
    "prometheus": {
        "replicas": ("PROVEN", "`kube-state-metrics.replicas`"),
        "image tag": ("PROVEN", "`kube-state-metrics.image.tag`"),
        "memory limit": ("PROVEN", "`kube-state-metrics.resources.limits.memory`"),
        "env value": ("NOT TRIED", "no such field"),
        "annotation": ("PROVEN", "`kube-state-metrics.podAnnotations.example.com/codify`"),
    },
}


@pytest.mark.slow  # real charts
@pytest.mark.parametrize("chart", sorted(EXPECTED))
def test_five_fields_on_a_real_chart(chart: str, tmp_path: Path) -> None:
    rows = corpus_script().trial(ROOT / "tests/data/charts" / chart, chart, tmp_path, CmpSettings.from_env())
    got = {label: (verdict, detail) for label, verdict, detail in rows}
    assert set(got) == set(EXPECTED[chart])
    for label, (verdict, needle) in EXPECTED[chart].items():
        assert got[label][0] == verdict, (label, got[label])
        assert needle in got[label][1], (label, got[label])
        if verdict == "PROVEN":
            assert f"envs/{chart}.yaml" in got[label][1]  # the environment's file, never the chart's

"""The drift gate reads argocd-cm's overrides merged as Argo CD merges them.

argo-cd v3.5.1 util/settings/settings.go appendResourceOverridesFromSplitKeys: a split
``resource.customizations.ignoreDifferences.<group>_<Kind>`` key replaces the ignoreDifferences of
the ``resource.customizations`` block's entry for that kind; the two are not both applied.
"""

from __future__ import annotations

from pathlib import Path

from standins.argo_api import FakeArgo
from tests.notifier.conftest import drill_app

from .conftest import get, make_app

GPU = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"
BLOCK = f"apps/Deployment:\n  ignoreDifferences: |\n    jsonPointers:\n    - {GPU}\n"
SPLIT = "resource.customizations.ignoreDifferences.apps_Deployment"


def gpu_reasons(argo: FakeArgo, tmp_path: Path, data: dict[str, str]) -> list[str]:
    mount = tmp_path / "argocd-cm"
    mount.mkdir()
    for key, value in data.items():
        (mount / key).write_text(value)
    app = make_app(argo, argocd_cm_file=str(mount))
    body = get(app, "/v1/gates/drift?app=deepseek-inference").get_json()
    return [r for r in body["reasons"] if "nvidia.com~1gpu" in r]


def test_the_blocks_rule_alone_ignores_the_gpu_limit(argo: FakeArgo, tmp_path: Path) -> None:
    drill_app(argo)
    assert gpu_reasons(argo, tmp_path, {"resource.customizations": BLOCK}) == []


def test_a_split_key_for_the_kind_replaces_the_blocks_rule(argo: FakeArgo, tmp_path: Path) -> None:
    drill_app(argo)
    data = {"resource.customizations": BLOCK, SPLIT: "jsonPointers:\n- /spec/paused\n"}
    [reason] = gpu_reasons(argo, tmp_path, data)
    assert "2 -> 4 by kubectl-patch" in reason

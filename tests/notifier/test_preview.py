"""driftguard-notifier preview: the exact payload a channel would be sent, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from standins.argo_api import FakeArgo
from standins.drill import serve_drill

CLI = str(Path(sys.executable).parent / "driftguard-notifier")


def files(tmp_path: Path) -> tuple[str, str]:
    fake = FakeArgo()
    serve_drill(fake)
    app = fake.apps[("argocd", "deepseek-inference")]
    (tmp_path / "app.json").write_text(json.dumps(app))
    (tmp_path / "managed.json").write_text(json.dumps(fake.managed[("argocd", "deepseek-inference")]))
    return str(tmp_path / "app.json"), str(tmp_path / "managed.json")


def preview(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    app, managed = files(tmp_path)
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env}
    return subprocess.run(
        [CLI, "preview", "--app", app, "--managed-resources", managed, *args],
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_preview_prints_each_channels_payload(tmp_path: Path) -> None:
    out: dict[str, Any] = {}
    for channel in ("feishu", "slack", "pagerduty"):
        done = preview(
            tmp_path, "--channel", channel, "--locale", "en", "--argocd-url", "https://argocd.example.com"
        )
        assert done.returncode == 0, done.stderr
        out[channel] = json.loads(done.stdout)
    assert out["feishu"]["card"]["schema"] == "2.0"
    assert out["feishu"]["card"]["header"]["title"]["content"].startswith(
        "[ERROR] deepseek-inference: GPU limit 2 -> 4 (kubectl-patch)"
    )
    assert "sign" not in out["feishu"]  # the payload, not the signed request: no secret needed
    assert out["slack"]["blocks"][0]["type"] == "header"
    assert out["pagerduty"]["payload"]["summary"].startswith(
        "deepseek-inference: GPU limit 2 -> 4 (kubectl-patch)"
    )
    assert (
        out["pagerduty"]["client_url"] == "https://argocd.example.com/applications/argocd/deepseek-inference"
    )
    sent = json.dumps(out)
    assert (
        "rotated-PLANTED-secret" not in sent and "db-PLANTED-password" not in sent
    )  # masked as the service does


def test_preview_uses_a_template_override_and_the_time_zone(tmp_path: Path) -> None:
    stock = (Path(__file__).parents[2] / "notifier" / "templates" / "feishu.zh-CN.j2").read_text()
    overrides = tmp_path / "templates"
    overrides.mkdir()
    (overrides / "feishu.zh-CN.j2").write_text(
        stock.replace("{% macro title(d) %}", "{% macro title(d) %}【团队】")
    )
    done = preview(
        tmp_path,
        "--channel",
        "feishu",
        "--time-zone",
        "Asia/Shanghai",
        DRIFTGUARD_NOTIFIER_TEMPLATES=str(overrides),
    )
    assert done.returncode == 0, done.stderr
    card = json.loads(done.stdout)["card"]
    assert card["header"]["title"]["content"].startswith("【团队】重要｜deepseek-inference：GPU 限制 2 → 4")
    text = json.dumps(card, ensure_ascii=False)
    assert "北京时间" in text and "CST" not in text  # issue 30: CST also reads as US Central


def test_a_broken_override_is_reported(tmp_path: Path) -> None:
    overrides = tmp_path / "templates"
    overrides.mkdir()
    (overrides / "slack.en.j2").write_text("{% macro title(d) %}{{ d.nope.deeper }}{% endmacro %}")
    done = preview(tmp_path, "--channel", "slack", DRIFTGUARD_NOTIFIER_TEMPLATES=str(overrides))
    assert done.returncode == 2 and "slack.en.j2 is broken" in done.stderr


def test_preview_reads_argocd_cm_merged_as_argo_cd_merges_it(tmp_path: Path) -> None:
    # argo-cd v3.5.1 util/settings/settings.go appendResourceOverridesFromSplitKeys: the split key
    # replaces the block's ignoreDifferences for apps/Deployment, it is not applied beside it
    gpu = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"
    block = f"apps/Deployment:\n  ignoreDifferences: |\n    jsonPointers:\n    - {gpu}\n"
    split = "resource.customizations.ignoreDifferences.apps_Deployment"
    titles = []
    for n, data in enumerate(
        ({"resource.customizations": block}, {"resource.customizations": block, split: "{}"})
    ):
        mount = tmp_path / f"argocd-cm-{n}"
        mount.mkdir()
        for key, value in data.items():
            (mount / key).write_text(value)
        done = preview(tmp_path, "--channel", "slack", "--locale", "en", DRIFTGUARD_ARGOCD_CM_FILE=str(mount))
        assert done.returncode == 0, done.stderr
        titles.append(json.loads(done.stdout)["blocks"][0]["text"]["text"])
    assert "GPU limit" not in titles[0]
    assert "GPU limit 2 -> 4 (kubectl-patch)" in titles[1]

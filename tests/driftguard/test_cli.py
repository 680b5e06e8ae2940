"""driftguard diff: the engine for people, on files, as a subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from standins.drill import inference_desired, inference_live, managed_item

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "driftguard", *args], capture_output=True, text=True, cwd=ROOT, check=False
    )


def test_diff_two_manifests_text(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(inference_desired()))
    (tmp_path / "l.yaml").write_text(yaml.safe_dump(inference_live()))
    proc = run("diff", "--desired", str(tmp_path / "d.yaml"), "--live", str(tmp_path / "l.yaml"))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "Deployment.apps ai-serving/deepseek-inference [modified]"
    assert lines[1] == "  human (1)"
    assert "nvidia.com~1gpu" in lines[2] and "kubectl-patch" in lines[2] and '"2" -> "4"' in lines[2]


def test_diff_managed_resources_json_with_app_rules(tmp_path: Path) -> None:
    (tmp_path / "mr.json").write_text(
        json.dumps({"items": [managed_item(inference_desired(), inference_live())]})
    )
    proc = run(
        "diff",
        "--managed-resources",
        str(tmp_path / "mr.json"),
        "--app",
        str(ROOT / "examples/gitops/apps/inference.yaml"),
        "--format",
        "json",
    )
    out = json.loads(proc.stdout)
    replicas = [c for c in out["changes"] if c["path"] == "/spec/replicas"]
    assert replicas[0]["class"] == "ignored"
    human = [c for c in out["changes"] if c["class"] == "human"]
    assert human[0]["actor"] == {
        "manager": "kubectl-patch",
        "operation": "Update",
        "time": "2026-11-29T14:02:07Z",
    }
    assert set(human[0]["resource"]) == {"group", "kind", "namespace", "name"}
    assert out["alerting"] == 1


def test_no_drift_exits_zero(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(inference_desired()))
    proc = run("diff", "--desired", str(tmp_path / "d.yaml"), "--live", str(tmp_path / "d.yaml"))
    assert (proc.returncode, proc.stdout) == (0, "no drift\n")


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("apiVersion: v1\nkind: [\n")
    proc = run("diff", "--desired", str(tmp_path / "bad.yaml"), "--live", str(tmp_path / "bad.yaml"))
    assert proc.returncode == 2 and proc.stderr.startswith("driftguard: error:")
    assert re.search(r"bad.yaml:[23]: invalid YAML", proc.stderr)
    (tmp_path / "mr.json").write_text("{not json")
    proc = run("diff", "--managed-resources", str(tmp_path / "mr.json"))
    assert proc.returncode == 2 and "not JSON" in proc.stderr
    proc = run("diff", "--desired", str(tmp_path / "bad.yaml"))
    assert proc.returncode == 2 and "--desired needs --live" in proc.stderr

"""The CMP's own metrics: one JSON line per generate, for a log pipeline to count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import Generate
from .test_guards_and_errors import chart


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_one_line_per_render_ok_refused_and_error(generate: Generate, repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "render.log"
    app = chart(repo, "gated")
    ok = generate(app, DRIFTGUARD_CMP_RENDER_LOG=str(log), ARGOCD_APP_PROJECT_NAME="payments")
    assert ok.returncode == 0, ok.stderr
    # a planted secret in the values must not reach the log through the refusal
    refused = generate(
        app,
        [{"name": "values", "string": "enabled: false\npassword: hunter2-planted"}],
        DRIFTGUARD_CMP_RENDER_LOG=str(log),
    )
    assert refused.returncode == 3
    error = generate(app, [{"name": "no-such-parameter", "string": "x"}], DRIFTGUARD_CMP_RENDER_LOG=str(log))
    assert error.returncode == 2
    first, second, third = lines(log)
    assert first["driftguard"] == "render" and first["verdict"] == "ok"
    assert (first["renderer"], first["resources"], first["guard"]) == ("helm", 1, "")
    assert first["app"] == "apps/argocd_gated" and first["project"] == "payments"
    assert first["revision"] == "0123456789abcdef0123456789abcdef01234567"
    assert isinstance(first["ms"], int) and first["ms"] >= 0
    assert first["ts"].endswith("Z")
    assert (second["verdict"], second["guard"], second["resources"]) == ("refused", "empty", 0)
    assert (third["verdict"], third["guard"]) == ("error", "")
    assert "hunter2" not in log.read_text()
    # which tools rendered, on every line (the versions the binaries report: test_tool_versions.py)
    from .test_tool_versions import install_tools, upstream_versions

    for line in (first, second, third):
        assert line["helm"] == install_tools.TOOLS["helm"][2]
        assert line["kustomize"] == "v" + upstream_versions()["kustomize"]
    # stdout stays the manifests and nothing else
    assert "driftguard" not in ok.stdout.split("kind:")[0]


def test_the_tenant_cannot_point_the_log_elsewhere(generate: Generate, repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "tenant-chose-this"
    app = chart(repo, "gated")
    # plugin.env reaches the plugin as ARGOCD_ENV_*: not a setting of the sidecar, and refused
    proc = generate(app, ARGOCD_ENV_DRIFTGUARD_CMP_RENDER_LOG=str(target))
    assert proc.returncode == 2
    assert "unknown plugin env variable ARGOCD_ENV_DRIFTGUARD_CMP_RENDER_LOG" in proc.stderr
    assert not target.exists()


def test_off_outside_the_sidecar_by_default(generate: Generate, repo: Path, tmp_path: Path) -> None:
    # PID 1 here is not argocd-cmp-server: nothing is written anywhere (not to PID 1's stdout)
    proc = generate(chart(repo, "gated"))
    assert proc.returncode == 0, proc.stderr
    assert '"driftguard":"render"' not in proc.stdout + proc.stderr


def test_a_log_that_cannot_be_written_never_fails_the_render(
    generate: Generate, repo: Path, tmp_path: Path
) -> None:
    app = chart(repo, "gated")
    proc = generate(app, DRIFTGUARD_CMP_RENDER_LOG=str(tmp_path / "no" / "such" / "dir" / "log"))
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    proc = generate(app, DRIFTGUARD_CMP_RENDER_LOG=str(tmp_path / "link"))
    assert proc.returncode == 0 and not (tmp_path / "elsewhere").exists()  # never followed

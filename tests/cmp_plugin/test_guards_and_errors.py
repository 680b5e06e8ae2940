"""Guards (empty, stray-artifacts, duplicates) and bad input: a clear refusal, never a crash, never a shell."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import wait_until

from .conftest import Generate

EMPTYABLE = """\
{{- if .Values.enabled }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
{{- end }}
"""


def chart(root: Path, name: str, template: str = EMPTYABLE, values: str = "enabled: true\n") -> str:
    d = root / "charts" / name
    (d / "templates").mkdir(parents=True)
    (d / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n")
    (d / "values.yaml").write_text(values)
    (d / "templates" / "t.yaml").write_text(template)
    return f"charts/{name}"


def first_line(proc: object) -> str:
    return proc.stderr.splitlines()[0]  # type: ignore[attr-defined]


def assert_refusal_shape(stderr: str) -> None:
    lines = stderr.splitlines()
    assert lines[0].startswith("driftguard: ")
    assert len(lines) <= 32
    assert lines[-1].startswith("fix: ")


# --- empty ---------------------------------------------------------------------------------------


def test_empty_render_is_refused(generate: Generate, repo: Path) -> None:
    app = chart(repo, "gated")
    proc = generate(app, [{"name": "values", "string": "enabled: false"}])
    assert proc.returncode == 3 and proc.stdout == ""
    assert first_line(proc) == "driftguard: refused by empty: helm rendered 0 resources"
    assert "allow-empty" in proc.stderr.splitlines()[-1]
    assert_refusal_shape(proc.stderr)


def test_allow_empty_lets_it_through_with_a_warning(generate: Generate, repo: Path) -> None:
    app = chart(repo, "gated")
    proc = generate(
        app, [{"name": "values", "string": "enabled: false"}, {"name": "allow-empty", "string": "true"}]
    )
    assert proc.returncode == 0 and proc.stdout.strip() == ""
    assert "allow-empty is true" in proc.stderr


def test_team_default_from_plugin_env(generate: Generate, repo: Path) -> None:
    app = chart(repo, "gated")
    proc = generate(
        app, ARGOCD_ENV_DRIFTGUARD_VALUES="enabled: false", ARGOCD_ENV_DRIFTGUARD_ALLOW_EMPTY="true"
    )
    assert proc.returncode == 0, proc.stderr
    proc = generate(
        app,
        [{"name": "allow-empty", "string": "false"}],
        ARGOCD_ENV_DRIFTGUARD_VALUES="enabled: false",
        ARGOCD_ENV_DRIFTGUARD_ALLOW_EMPTY="true",
    )
    assert proc.returncode == 3  # the Application wins over the plugin env


# --- stray artifacts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stray",
    ["helm-rendered/deployment.yaml", "kustomize-build/all.yaml", "templates/old.local.yaml", "x.local.yml"],
)
def test_committed_render_output_is_refused(generate: Generate, repo: Path, stray: str) -> None:
    app = chart(repo, "web2", template="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    path = repo / app / stray
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stale}\n")
    proc = generate(app)
    assert proc.returncode == 3 and proc.stdout == ""
    assert first_line(proc).startswith("driftguard: refused by stray-artifacts: 1 path(s)")
    shown = stray.split("/")[0] + "/" if stray.startswith(("helm-rendered", "kustomize-build")) else stray
    assert f"  {shown}" in proc.stderr.splitlines()
    assert_refusal_shape(proc.stderr)


def test_configurable_stray_patterns(generate: Generate, repo: Path) -> None:
    (repo / "plain" / "rendered-by-hand.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: plain}\n"
    )
    proc = generate("plain", [{"name": "stray-patterns", "array": ["rendered-*"]}])
    assert proc.returncode == 3 and "rendered-by-hand.yaml" in proc.stderr


# --- duplicates ------------------------------------------------------------------------------------


def test_duplicates_are_refused_naming_both_sources(generate: Generate, repo: Path) -> None:
    (repo / "plain" / "again.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flow\n  namespace: plain\n"
    )
    proc = generate("plain")
    assert proc.returncode == 3
    assert first_line(proc) == "driftguard: refused by duplicates: 1 resource(s) rendered more than once"
    assert "ConfigMap plain/flow: again.yaml:1 and app.yml:1" in proc.stderr


def test_default_namespace_counts_for_duplicates(generate: Generate, repo: Path) -> None:
    template = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: apps\n"
    app = chart(repo, "dup", template=template)
    proc = generate(app)
    assert proc.returncode == 3 and "ConfigMap apps/a" in proc.stderr


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/etc/passwd", "absolute paths are not allowed"),
        ("../../../../../../etc/passwd", "outside the repository checkout"),
        ("../../envs/missing.yaml", "does not exist"),
    ],
)
def test_values_files_must_stay_in_the_checkout(generate: Generate, value: str, message: str) -> None:
    proc = generate("charts/web", [{"name": "values-files", "array": [value]}])
    assert proc.returncode == 2 and proc.stdout == ""
    assert first_line(proc).startswith("driftguard: error: values-files entry") and message in first_line(
        proc
    )


def test_symlink_out_of_the_checkout_is_refused(generate: Generate, repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret-values.yaml"
    outside.write_text("password: hunter2\n")
    (repo / "envs" / "link.yaml").symlink_to(outside)
    proc = generate("charts/web", [{"name": "values-files", "array": ["../../envs/link.yaml"]}])
    assert proc.returncode == 2 and "outside the repository checkout" in proc.stderr
    assert "hunter2" not in proc.stderr


def test_unknown_parameter(generate: Generate) -> None:
    proc = generate("charts/web", [{"name": "valuesfiles", "array": ["a"]}])
    assert proc.returncode == 2
    assert first_line(proc).startswith(
        "driftguard: error: unknown parameter 'valuesfiles'; known parameters: values-files,"
    )


def test_unknown_param_variable_and_bad_types(generate: Generate) -> None:
    proc = generate("charts/web", PARAM_VALUESFILES_0="a.yaml")
    assert proc.returncode == 2 and "PARAM_VALUESFILES_0" in proc.stderr
    proc = generate("charts/web", [{"name": "allow-empty", "string": "maybe"}])
    assert proc.returncode == 2 and "must be true or false" in proc.stderr
    proc = generate("charts/web", [{"name": "renderer", "string": "jsonnet"}])
    assert proc.returncode == 2 and "must be one of auto, helm, kustomize, directory" in proc.stderr
    proc = generate("charts/web", ARGOCD_APP_PARAMETERS="{not json")
    assert proc.returncode == 2 and "ARGOCD_APP_PARAMETERS is not JSON" in proc.stderr


def test_param_variables_without_app_parameters(generate: Generate, repo: Path) -> None:
    app = chart(repo, "gated")
    proc = generate(app, PARAM_VALUES="enabled: false", PARAM_ALLOW_EMPTY="true")
    assert proc.returncode == 0, proc.stderr


def test_malformed_yaml_names_file_and_line(generate: Generate, repo: Path) -> None:
    (repo / "plain" / "broken.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [oops\n")
    proc = generate("plain")
    assert proc.returncode == 2
    assert "broken.yaml:" in first_line(proc) and "invalid YAML" in first_line(proc)


@pytest.mark.parametrize(
    "doc",
    [
        "---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: deep}, x: DEEP}\n",
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}, x: DEEP}\n",
    ],
)
def test_a_render_nested_too_deep_is_a_clean_refusal(generate: Generate, repo: Path, doc: str) -> None:
    # flow style nested deeper than Python's recursion (a template prints it as it likes): the
    # scanner's flow reader used to let a RecursionError out as a traceback
    app = chart(repo, "deep", template=doc.replace("DEEP", "[" * 3000 + "]" * 3000))
    proc = generate(app)
    assert proc.returncode == 2, proc.stderr
    assert "nesting too deep" in first_line(proc) and "Traceback" not in proc.stderr
    assert_refusal_shape(proc.stderr)


def test_renderer_failure_shows_its_stderr_trimmed(generate: Generate, repo: Path) -> None:
    app = chart(repo, "broken", template="{{ .Values.missing.deeper }}\n" + "x" * 10)
    proc = generate(app)
    assert proc.returncode == 2
    assert first_line(proc).startswith("driftguard: error: helm template failed")
    assert "nil pointer" in proc.stderr
    assert_refusal_shape(proc.stderr)


def test_wrong_renderer_asked_for(generate: Generate) -> None:
    proc = generate("plain", [{"name": "renderer", "string": "helm"}])
    assert proc.returncode == 2 and "has no helm marker file" in proc.stderr


def test_hanging_renderer_is_killed_with_its_process_group(
    generate: Generate, repo: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    fake = tmp_path / "helm"
    fake.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pidfile}\nwait\n")
    fake.chmod(0o755)
    proc = generate(
        "charts/platform",
        DRIFTGUARD_HELM=str(fake),
        # the in-process work done while helm runs (imports, source guards) must end before the
        # render's alarm, a moment after this deadline, or that alarm stops the render unnamed:
        # 5 s leaves a loaded machine room for it
        DRIFTGUARD_CMP_TIMEOUT="5",
        DRIFTGUARD_CMP_TOOL_WRITE_PATHS=str(tmp_path),  # the fake writes its child's pid here
    )
    assert proc.returncode == 2  # the fake sleeps 60 s: this message is the 5 s deadline stopping it
    assert first_line(proc) == "driftguard: error: helm template did not finish in 5 s and was stopped"
    child = int(pidfile.read_text())
    # it would sleep on for a minute: gone well before is gone with the group (the limit stays
    # under that minute, and leaves a loaded machine time to finish the kill)
    wait_until(lambda: not alive(child), "the renderer's child gone with its group", timeout=45)


def alive(pid: int) -> bool:
    """Running (a killed orphan may linger as a zombie until its new parent reaps it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_output_over_the_cap_is_refused(generate: Generate) -> None:
    proc = generate("charts/web", DRIFTGUARD_CMP_MAX_OUTPUT_BYTES="200")
    assert proc.returncode == 2 and "more than 200 bytes" in proc.stderr and proc.stdout == ""


def test_no_shell_ever_sees_parameters(generate: Generate, repo: Path, tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    proc = generate(
        "charts/web",
        [
            {"name": "values-files", "array": [f"$(touch {canary})"]},
            {"name": "namespace", "string": f"x; touch {canary}"},
        ],
    )
    assert proc.returncode == 2
    proc = generate("charts/web", [{"name": "release-name", "string": f"`touch {canary}`"}])
    assert proc.returncode == 2 and "not a valid Helm release name" in proc.stderr
    assert not canary.exists()


def test_missing_tool_names_the_setting(generate: Generate) -> None:
    proc = generate("charts/web", DRIFTGUARD_HELM="/nonexistent/helm")
    assert proc.returncode == 2
    assert first_line(proc).startswith("driftguard: error: DRIFTGUARD_HELM: helm not found")
    assert proc.stderr.splitlines()[-1] == "fix: set DRIFTGUARD_HELM in the sidecar's environment"

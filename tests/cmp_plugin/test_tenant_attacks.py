"""A hostile tenant's repository and Application (issue 14): each attack built here, run with the real
helm and kustomize, the plugin started as argocd-cmp-server starts it (its own process group, the
CMP environment, cwd = <checkout>/<source path>).

Every test also checks that the refusal never prints what the outside file holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cmp_plugin import launch, paths
from tests.helpers import run_cmp, start_cmp, wait_until

from .conftest import cmp_env

SECRET = "s3cr3t-outside-the-checkout-7f1d"
ENV_SECRET = "env-secret-value-91c2"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Files of the sidecar that are not in the checkout: a token, another team's values."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "token").write_text(SECRET + "\n")
    (out / "values.yaml").write_text(f"stolen: {SECRET}\n")
    (out / "tpl.yaml").write_text(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  s: {SECRET}\n"
    )
    (out / "chart").mkdir()
    (out / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: sub\nversion: 1.0.0\n")
    (out / "chart" / "templates").mkdir()
    (out / "chart" / "templates" / "cm.yaml").write_text(
        (out / "tpl.yaml").read_text().replace("name: x", "name: sub")
    )
    (out / "manifests").mkdir()
    (out / "manifests" / "cm.yaml").write_text((out / "tpl.yaml").read_text())
    return out


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / ".git").mkdir(parents=True)
    return root


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def chart(root: Path, app: str, *, templates: dict[str, str] | None = None, values: str = "") -> Path:
    here = root / app
    write(here / "Chart.yaml", "apiVersion: v2\nname: app\nversion: 1.0.0\n")
    write(here / "values.yaml", values)
    for name, text in (templates or {}).items():
        write(here / "templates" / name, text)
    return here


CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  v: {{{{ toYaml .Values | quote }}}}\n"


def plugin(
    cwd: Path,
    app: str,
    params: list[dict[str, Any]] | None = None,
    *,
    command: str = "generate",
    cache: Path | None = None,
    **extra: str,
) -> subprocess.CompletedProcess[str]:
    """The plugin as argocd-cmp-server runs it: own process group, exactly the CMP environment."""
    env = cmp_env(app, params, **extra)
    env["DRIFTGUARD_CMP_CACHE_DIR"] = str(cache or cwd.parent / "cache")
    # the sidecar's Argo CD token: an env value that must never be printed (nothing listens on :9)
    env["DRIFTGUARD_ARGOCD_URL"] = "http://127.0.0.1:9"
    env["DRIFTGUARD_ARGOCD_TOKEN"] = ENV_SECRET
    return run_cmp(cwd, env, command, start_new_session=True)


def refused(run: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The first stderr line of a refusal; asserts it leaks nothing and names what it must."""
    assert run.returncode != 0, run.stdout[-2000:]
    assert SECRET not in run.stdout + run.stderr
    assert ENV_SECRET not in run.stdout + run.stderr
    first = run.stderr.splitlines()[0]
    assert first.startswith("driftguard: "), run.stderr
    for needle in needles:
        assert needle in run.stderr, run.stderr
    return first


# --- 1. admin options are not tenant inputs -------------------------------------------------


def kustomize_stealer(root: Path, outside: Path) -> Path:
    here = root / "apps" / "steal"
    write(
        here / "kustomization.yaml",
        f"configMapGenerator:\n  - name: loot\n    files:\n      - t={outside / 'token'}\n",
    )
    return here


def test_load_restrictor_none_from_the_application_parameters_is_refused(
    checkout: Path, outside: Path
) -> None:
    here = kustomize_stealer(checkout, outside)
    run = plugin(
        here, "apps/steal", [{"name": "kustomize-load-restrictor", "string": "LoadRestrictionsNone"}]
    )
    first = refused(run, "DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR")
    assert first.startswith("driftguard: refused by policy: parameter kustomize-load-restrictor")


def test_load_restrictor_none_from_the_application_plugin_env_is_refused(
    checkout: Path, outside: Path
) -> None:
    here = kustomize_stealer(checkout, outside)
    run = plugin(here, "apps/steal", ARGOCD_ENV_DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR="LoadRestrictionsNone")
    assert "refused by policy" in refused(run)


def test_load_restrictor_none_as_a_param_variable_is_refused(checkout: Path, outside: Path) -> None:
    """Argo CD also hands parameters over as PARAM_* variables (without ARGOCD_APP_PARAMETERS)."""
    here = kustomize_stealer(checkout, outside)
    run = plugin(here, "apps/steal", PARAM_KUSTOMIZE_LOAD_RESTRICTOR="LoadRestrictionsNone")
    assert "refused by policy" in refused(run)


def test_enable_helm_from_the_application_is_refused(checkout: Path) -> None:
    here = write(checkout / "apps" / "k" / "kustomization.yaml", "resources: [cm.yaml]\n").parent
    write(here / "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
    run = plugin(here, "apps/k", [{"name": "kustomize-enable-helm", "string": "true"}])
    assert "kustomize-enable-helm" in refused(run)
    # tightening (or restating) the platform's value is fine
    ok = plugin(
        here,
        "apps/k",
        [
            {"name": "kustomize-enable-helm", "string": "false"},
            {"name": "kustomize-load-restrictor", "string": "LoadRestrictionsRootOnly"},
        ],
    )
    assert ok.returncode == 0, ok.stderr
    assert "name: a" in ok.stdout


def test_the_platform_may_open_the_load_restrictor_and_a_tenant_may_close_it(
    checkout: Path, outside: Path
) -> None:
    here = kustomize_stealer(checkout, outside)
    # the sidecar's own setting: the admin's choice, like argocd-cm kustomize.buildOptions ...
    opened = plugin(here, "apps/steal", DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR="LoadRestrictionsNone")
    # ... still refused: the file it names is outside the checkout
    refused(opened, "leads outside the repository checkout")
    # and a tenant can always tighten it back
    closed = plugin(
        here,
        "apps/steal",
        [{"name": "kustomize-load-restrictor", "string": "LoadRestrictionsRootOnly"}],
        DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR="LoadRestrictionsNone",
    )
    refused(closed)


# --- 2. a comma in values-files -------------------------------------------------------------


def test_a_comma_in_a_values_file_entry_is_refused(checkout: Path, outside: Path) -> None:
    here = chart(checkout, "apps/c", templates={"cm.yaml": CM.format(name="c")})
    entry = f"d,{outside / 'values.yaml'}"
    write(here / "d", "a: 1\n")
    write(here / entry, "b: 2\n")  # the whole entry exists inside the checkout
    run = plugin(here, "apps/c", [{"name": "values-files", "array": [entry]}])
    assert "comma" in refused(run)


# --- 3. symlinks out of the checkout --------------------------------------------------------


def symlinked(checkout: Path, outside: Path, kind: str) -> tuple[Path, str]:
    """An app whose ``kind`` part is a symlink out of the checkout."""
    app = f"apps/{kind}"
    if kind == "values":
        here = chart(checkout, app, templates={"cm.yaml": CM.format(name="v")})
        (here / "values.yaml").unlink()
        (here / "values.yaml").symlink_to(outside / "values.yaml")
    elif kind == "files-get":
        here = chart(
            checkout,
            app,
            templates={
                "cm.yaml": 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: f\ndata:\n  t: {{ .Files.Get "files/x" | quote }}\n'
            },
        )
        (here / "files").mkdir()
        (here / "files" / "x").symlink_to(outside / "token")
    elif kind == "template":
        here = chart(checkout, app)
        (here / "templates").mkdir()
        (here / "templates" / "cm.yaml").symlink_to(outside / "tpl.yaml")
    elif kind == "subchart":
        here = chart(checkout, app)
        (here / "charts").mkdir()
        (here / "charts" / "sub").symlink_to(outside / "chart")
    elif kind == "plain":
        here = checkout / app
        here.mkdir(parents=True)
        write(here / "ok.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n")
        (here / "cm.yaml").symlink_to(outside / "tpl.yaml")
    elif kind == "app-dir":
        (checkout / "apps").mkdir(parents=True, exist_ok=True)
        here = checkout / app
        here.symlink_to(outside / "manifests")
    elif kind == "values-file-param":
        here = chart(checkout, app, templates={"cm.yaml": CM.format(name="p")})
        (here / "prod.yaml").symlink_to(outside / "values.yaml")
    else:
        raise AssertionError(kind)
    return here, app


KINDS = ("values", "files-get", "template", "subchart", "plain", "app-dir", "values-file-param")


@pytest.mark.parametrize("kind", KINDS)
def test_a_symlink_out_of_the_checkout_is_refused_in_generate(
    checkout: Path, outside: Path, kind: str
) -> None:
    here, app = symlinked(checkout, outside, kind)
    params = [{"name": "values-files", "array": ["prod.yaml"]}] if kind == "values-file-param" else None
    run = plugin(here, app, params)
    assert "outside the repository checkout" in refused(run) or "symlink" in run.stderr.splitlines()[0]


@pytest.mark.parametrize("kind", KINDS)
def test_a_symlink_out_of_the_checkout_is_refused_in_render(checkout: Path, outside: Path, kind: str) -> None:
    symlinked(checkout, outside, kind)
    args = ["--values-file", "prod.yaml"] if kind == "values-file-param" else []
    run = run_cmp(
        checkout,
        {**cmp_env("x"), "DRIFTGUARD_CMP_CACHE_DIR": str(checkout.parent / "cache")},
        "render",
        str(checkout / "apps" / kind),
        *args,
    )
    first = refused(run)
    assert "outside the repository checkout" in first or "symlink" in first


@pytest.mark.parametrize("kind", KINDS)
def test_errors_never_show_what_an_outside_file_holds(checkout: Path, outside: Path, kind: str) -> None:
    """Outside files that are broken YAML: a parser error would quote them, so they must never be read."""
    for path in outside.rglob("*"):
        if path.is_file():
            path.write_text(f"stolen: [{SECRET}\n  {{{{ {SECRET} \n")
    here, app = symlinked(checkout, outside, kind)
    params = [{"name": "values-files", "array": ["prod.yaml"]}] if kind == "values-file-param" else None
    refused(plugin(here, app, params))  # refused() asserts neither the file nor the token shows


def test_a_symlink_inside_the_checkout_still_renders(checkout: Path) -> None:
    here = chart(checkout, "apps/in", templates={"cm.yaml": CM.format(name="in")})
    write(checkout / "common" / "values.yaml", "shared: true\n")
    (here / "values.yaml").unlink()
    (here / "values.yaml").symlink_to(Path("../../common/values.yaml"))
    run = plugin(here, "apps/in")
    assert run.returncode == 0, run.stderr
    assert "shared: true" in run.stdout


def test_a_kustomize_base_outside_the_checkout_is_refused(checkout: Path, outside: Path) -> None:
    write(outside / "base" / "kustomization.yaml", "resources: [cm.yaml]\n")
    write(outside / "base" / "cm.yaml", (outside / "tpl.yaml").read_text())
    # relative: kustomize itself refuses an absolute base, not one that climbs out
    here = write(
        checkout / "apps" / "kb" / "kustomization.yaml", "resources:\n  - ../../../outside/base\n"
    ).parent
    assert "refers to" in refused(plugin(here, "apps/kb"))


# --- 7. guards a tenant could simply turn off -----------------------------------------------

POLICY = """\
projects:
  - project: "prod-*"
    tenants-may-loosen: false
    parameters:
      max-prune-ratio: 0.1
  - project: "*"
    parameters:
      implicit-defaults: {default: warn, tenants-may-loosen: true}
"""


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    return write(tmp_path / "policy" / "policy.yaml", POLICY)


def empty_chart(checkout: Path) -> Path:
    return chart(
        checkout, "apps/empty", templates={"none.yaml": "{{- if .Values.enabled }}\nx: y\n{{- end }}\n"}
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("allow-empty", "true"),
        ("max-prune-ratio", "1"),
        ("implicit-defaults", "off"),
    ],
)
def test_production_tenants_cannot_loosen_a_guard(
    checkout: Path, policy_file: Path, name: str, value: str
) -> None:
    here = empty_chart(checkout)
    run = plugin(
        here,
        "apps/empty",
        [{"name": name, "string": value}],
        DRIFTGUARD_CMP_POLICY=str(policy_file),
        ARGOCD_APP_PROJECT_NAME="prod-payments",
    )
    first = refused(run)
    assert first.startswith(f"driftguard: refused by policy: parameter {name}={value}")
    assert "projects[0] (project 'prod-*')" in first


def test_protected_kinds_cannot_be_emptied_under_a_closed_entry(checkout: Path, policy_file: Path) -> None:
    here = empty_chart(checkout)
    run = plugin(
        here,
        "apps/empty",
        [{"name": "protected-kinds", "array": []}],
        DRIFTGUARD_CMP_POLICY=str(policy_file),
        ARGOCD_APP_PROJECT_NAME="prod-payments",
    )
    assert "protected-kinds" in refused(run)


def test_plugin_env_is_the_tenant_too(checkout: Path, policy_file: Path) -> None:
    """ARGOCD_ENV_DRIFTGUARD_* comes from the Application's plugin.env: policed like parameters."""
    here = empty_chart(checkout)
    run = plugin(
        here,
        "apps/empty",
        DRIFTGUARD_CMP_POLICY=str(policy_file),
        ARGOCD_APP_PROJECT_NAME="prod-payments",
        ARGOCD_ENV_DRIFTGUARD_ALLOW_EMPTY="true",
    )
    assert "allow-empty" in refused(run)


def test_tightening_is_always_allowed_and_other_projects_may_loosen(
    checkout: Path, policy_file: Path
) -> None:
    here = empty_chart(checkout)
    tight = plugin(
        here,
        "apps/empty",
        [{"name": "max-prune-ratio", "string": "0.05"}, {"name": "implicit-defaults", "string": "refuse"}],
        DRIFTGUARD_CMP_POLICY=str(policy_file),
        ARGOCD_APP_PROJECT_NAME="prod-payments",
    )
    assert "refused by empty" in refused(tight)  # past the policy, stopped by the guard itself
    loose = plugin(
        here,
        "apps/empty",
        [{"name": "allow-empty", "string": "true"}],
        DRIFTGUARD_CMP_POLICY=str(policy_file),
        ARGOCD_APP_PROJECT_NAME="team-sandbox",
    )
    assert loose.returncode == 0, loose.stderr


def test_without_a_policy_file_the_current_defaults_hold(checkout: Path) -> None:
    here = empty_chart(checkout)
    assert "refused by empty" in refused(plugin(here, "apps/empty"))
    loose = plugin(here, "apps/empty", [{"name": "allow-empty", "string": "true"}])
    assert loose.returncode == 0, loose.stderr


def test_the_policy_default_applies_when_the_tenant_sets_nothing(checkout: Path, tmp_path: Path) -> None:
    here = empty_chart(checkout)
    policy = write(
        tmp_path / "p.yaml", 'projects:\n  - project: "*"\n    parameters:\n      allow-empty: true\n'
    )
    run = plugin(here, "apps/empty", DRIFTGUARD_CMP_POLICY=str(policy))
    assert run.returncode == 0, run.stderr
    shown = plugin(here, "apps/empty", command="parameters", DRIFTGUARD_CMP_POLICY=str(policy))
    announced = {a["name"]: a for a in json.loads(shown.stdout)}
    assert announced["allow-empty"]["string"] == "true"


def test_a_broken_policy_names_the_setting(checkout: Path, tmp_path: Path) -> None:
    here = empty_chart(checkout)
    policy = write(
        tmp_path / "p.yaml", 'projects:\n  - project: "*"\n    parameters:\n      renderer: helm\n'
    )
    run = plugin(here, "apps/empty", DRIFTGUARD_CMP_POLICY=str(policy))
    assert "DRIFTGUARD_CMP_POLICY" in refused(run)
    admin = write(
        tmp_path / "q.yaml",
        'projects:\n  - project: "*"\n    parameters:\n      kustomize-load-restrictor:\n'
        "        default: LoadRestrictionsNone\n        tenants-may-loosen: true\n",
    )
    assert "can never loosen" in refused(plugin(here, "apps/empty", DRIFTGUARD_CMP_POLICY=str(admin)))


# --- 6. the launch plan cannot be planted ---------------------------------------------------


def planted(marker: Path, tool: str = "/bin/sh") -> bytes:
    """A launch plan in the real format that would run ``tool`` and leave ``marker``."""
    argv = [tool, "-c", f"echo planted > {marker}"]
    return "\x1e".join(("driftguard-launch-plan 1", "\x1f".join(argv), "PATH=/usr/bin")).encode()


@pytest.mark.parametrize("how", ["other-tool", "symlink", "group-writable"])
def test_a_planted_launch_plan_is_ignored_and_removed(checkout: Path, tmp_path: Path, how: str) -> None:
    here = chart(checkout, "apps/web", templates={"cm.yaml": CM.format(name="web")})
    cache = tmp_path / "shared-tmp" / "driftguard"
    cache.mkdir(parents=True)
    plan_path = Path(launch.plan_file(str(cache), "argocd_web"))
    marker = tmp_path / "ran"
    if how == "other-tool":
        plan_path.write_bytes(planted(marker))
    elif how == "symlink":
        (tmp_path / "elsewhere.plan").write_bytes(planted(marker))
        plan_path.symlink_to(tmp_path / "elsewhere.plan")
    else:  # the configured helm, but a file others could have rewritten
        plan_path.write_bytes(planted(marker, os.environ["DRIFTGUARD_HELM"]))
        plan_path.chmod(0o666)
    run = plugin(here, "apps/web", cache=cache)
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    assert not plan_path.is_symlink()
    if plan_path.exists():  # replaced by this render's own plan, private and pointing at helm
        assert plan_path.stat().st_mode & 0o077 == 0
        assert os.environ["DRIFTGUARD_HELM"].encode() in plan_path.read_bytes()


def test_a_planted_baseline_is_not_trusted(checkout: Path, tmp_path: Path) -> None:
    here = chart(checkout, "apps/web", templates={"cm.yaml": CM.format(name="web")})
    cache = tmp_path / "cache"
    cache.mkdir()
    fake = cache / (paths.safe_name("argocd_web") + ".json")
    keys = [["", "ConfigMap", "apps", f"cm-{i}"] for i in range(50)]
    fake.write_text(json.dumps({"revision": "x", "keys": keys}))
    fake.chmod(0o666)
    run = plugin(here, "apps/web", cache=cache)
    assert run.returncode == 0, run.stderr  # the planted 50-resource "baseline" did not refuse it


def test_a_250_character_application_name_renders_and_is_cached(checkout: Path, tmp_path: Path) -> None:
    here = chart(checkout, "apps/web", templates={"cm.yaml": CM.format(name="web")})
    name = "team-" + "a" * 58 + "_" + "w" * 186
    cache = tmp_path / "cache"
    for _ in range(2):  # the second render reads the plan and the baseline the first wrote
        # helm's own release-name limit (53) is the app's to meet, as with Argo CD's native helm
        run = plugin(
            here, "apps/web", [{"name": "release-name", "string": "web"}], cache=cache, ARGOCD_APP_NAME=name
        )
        assert run.returncode == 0, run.stderr
    names = sorted(p.name for p in cache.iterdir())
    mine = [
        n for n in names if n.startswith("team-")
    ]  # the plan and the baseline (others are keyed by content)
    assert len(mine) == 2 and all(len(n) < 100 for n in names), names


# --- 4. bounded renders ----------------------------------------------------------------------

BOMB = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n{{- range $i := until 100000000 }}\n  k{{ $i }}: v\n{{- end }}\n"
SPIN = "{{- range $i := until 100000 }}{{- range $j := until 100000 }}{{- end }}{{- end }}\n"


def test_a_memory_bomb_in_helm_is_refused_not_oom_killed(checkout: Path) -> None:
    here = chart(checkout, "apps/bomb", templates={"cm.yaml": BOMB})
    run = plugin(here, "apps/bomb", DRIFTGUARD_CMP_MAX_MEMORY=str(256 * 1024 * 1024))
    first = refused(run)
    assert "ran out of memory" in first and "DRIFTGUARD_CMP_MAX_MEMORY" in first
    assert len(run.stderr.splitlines()) <= 4  # no goroutine dump


def test_an_alias_bomb_in_a_kustomize_resource_is_refused_not_oom_killed(checkout: Path) -> None:
    here = checkout / "apps" / "aliases"
    refs = ", ".join(["*a{p}"] * 10)
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{refs.format(p=i - 1)}]" for i in range(1, 9)]
    body = "\n  ".join(lines)
    write(here / "cm.yaml", f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  {body}\n")
    write(here / "kustomization.yaml", "resources: [cm.yaml]\n")
    run = plugin(here, "apps/aliases", DRIFTGUARD_CMP_MAX_MEMORY=str(256 * 1024 * 1024))
    assert "ran out of memory" in refused(run)


@pytest.mark.slow  # 20,000 files
def test_in_process_work_is_under_the_render_deadline(checkout: Path) -> None:
    here = checkout / "apps" / "many"
    here.mkdir(parents=True)
    for i in range(20000):
        (here / f"cm-{i:05}.yaml").write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n")
    run = plugin(here, "apps/many", DRIFTGUARD_CMP_TIMEOUT="0.2")
    assert "did not finish in 0.2 s (DRIFTGUARD_CMP_TIMEOUT)" in refused(run)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            out += [int(c) for c in f.read().split()]
    return out


def _cpu_ticks(pid: int) -> int:
    """The CPU time ``pid`` has used (user + system), in clock ticks; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of proc(5)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_killing_the_plugins_process_group_takes_its_tools(checkout: Path) -> None:
    """argocd-cmp-server stops an overrunning command by killing its process group: helm must go too."""
    here = chart(checkout, "apps/spin", templates={"spin.yaml": SPIN})
    env = {**cmp_env("apps/spin"), "DRIFTGUARD_CMP_CACHE_DIR": str(checkout.parent / "cache")}
    proc = start_cmp(
        here,
        env,
        "generate",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # as argocd-cmp-server does (Setpgid)
    )
    helm: list[int] = []
    try:
        helm = wait_until(lambda: _children(proc.pid), "the plugin to start helm")
        # well into the template: helm has spent half a second of CPU (its start-up takes less)
        wait_until(lambda: sum(_cpu_ticks(p) for p in helm) >= os.sysconf("SC_CLK_TCK") // 2, "helm to spin")
        assert all(_alive(p) for p in helm), "helm ended on its own: the test proves nothing"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_until(lambda: not any(_alive(p) for p in helm), "helm to go with the plugin's process group")
    finally:  # whatever happened, leave no helm behind (one may be exiting as we look)
        for p in helm:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


def test_render_applies_the_same_policy_for_a_project(checkout: Path, policy_file: Path) -> None:
    """A PR check or a laptop sees the refusal the sidecar would give (render --project)."""
    here = empty_chart(checkout)
    run = run_cmp(
        checkout,
        {**cmp_env("x"), "DRIFTGUARD_CMP_POLICY": str(policy_file)},
        "render",
        str(here),
        "--project",
        "prod-payments",
        "--set-param",
        "allow-empty=true",
    )
    assert "refused by policy: parameter allow-empty=true" in refused(run)


def _running(needle: str) -> list[int]:
    """Live processes whose command line mentions ``needle``."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if needle in cmdline and _alive(int(proc.name)):
                found.append(int(proc.name))
    return found


def test_a_tool_stopped_at_the_deadline_takes_its_children(checkout: Path) -> None:
    """kustomize --enable-helm runs helm as its child: a timeout must stop both (they share our group)."""
    here = checkout / "apps" / "kh"
    chart(checkout, "apps/kh/charts/spin", templates={"spin.yaml": SPIN})
    write(
        here / "kustomization.yaml",
        "helmGlobals:\n  chartHome: charts\nhelmCharts:\n  - name: spin\n    releaseName: spin\n",
    )
    run = plugin(here, "apps/kh", DRIFTGUARD_CMP_TIMEOUT="3", DRIFTGUARD_KUSTOMIZE_ENABLE_HELM="true")
    try:
        assert "kustomize build did not finish in 3 s" in refused(run)
        # both were sent SIGKILL before the plugin returned; helm, kustomize's child, is not the
        # plugin's to wait for, and on a loaded machine it may still be on its way out
        wait_until(lambda: _running(str(here)) == [], "kustomize and its helm to be gone")
    finally:
        for pid in _running(str(here)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_planted_content_cache_entry_is_not_trusted(checkout: Path, tmp_path: Path) -> None:
    """implicit-defaults keeps what it learned of a chart in the cache by content digest; an entry
    someone else wrote (mode 0666 here) must not make the guard go quiet."""
    here = chart(
        checkout,
        "apps/gated",
        templates={"cm.yaml": "{{- if .Values.enabled }}\n" + CM.format(name="gated") + "{{- end }}\n"},
        values="enabled: true\n",
    )
    cache = tmp_path / "cache"
    first = plugin(here, "apps/gated", cache=cache)
    assert first.returncode == 0 and "rely on chart defaults" in first.stderr, first.stderr
    entries = sorted(cache.glob("*-*.json"))
    assert [e for e in entries if not e.name.startswith("apps")], sorted(p.name for p in cache.iterdir())
    for entry in entries:
        entry.write_text('{"gates": [], "planted": true}')
        entry.chmod(0o666)
    again = plugin(here, "apps/gated", cache=cache)
    assert again.returncode == 0 and "rely on chart defaults" in again.stderr, again.stderr

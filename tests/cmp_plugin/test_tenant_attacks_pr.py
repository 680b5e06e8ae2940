"""A hostile tenant's repository against the PR check and the helm argv (attacks after issue 14).

Each attack is built here as a git repository (symlinks committed as git stores them) or a chart,
run with the real helm, the plugin run as the CI job or argocd-cmp-server runs it. None of them may
print what a file outside the checkout, or the plugin's environment, holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from collections.abc import Mapping
from pathlib import Path

import pytest
from yaml import safe_dump as yaml_dump

from tests.helpers import run_cmp

from .conftest import cmp_env
from .gitrepo import REPO_URL, Repo, appset, configmaps

SECRET = "s3cr3t-outside-the-checkout-7f1d"
PROXY = f"http://ci:{SECRET}@proxy.example.com:3128"


def _diff(repo: Repo, base: str, head: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_HELM": os.environ["DRIFTGUARD_HELM"],
        "DRIFTGUARD_KUSTOMIZE": os.environ["DRIFTGUARD_KUSTOMIZE"],
        "HOME": str(repo.path.parent),
        **extra,
    }
    return run_cmp(repo.path, env, "diff", "--base", base, "--head", head, *args)


def _no_leak(proc: subprocess.CompletedProcess[str]) -> str:
    out = proc.stdout + proc.stderr
    assert SECRET not in out, out[-3000:]
    return out


# --- the git files generator follows no symlink out of the checkout ---------------------------


def test_a_git_files_generator_does_not_read_through_a_symlink_out_of_the_checkout(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text(f'{{"team": "{SECRET}"}}\n')
    repo = Repo(tmp_path / "gitops")
    repo.write("config/alpha/config.json", '{"team": "alpha"}\n')
    for team in ("alpha", "beta"):
        repo.write(f"teams/{team}/manifests.yaml", configmaps(f"{team}-a"))
    spec = {"git": {"repoURL": REPO_URL, "revision": "HEAD", "files": [{"path": "config/*/config.json"}]}}
    repo.write(
        "apps/teams.yaml", appset("teams", [spec], app_name="team-{{team}}", path="teams/{{path.basename}}")
    )
    base = repo.commit("base")
    (repo.path / "config" / "beta").mkdir()
    (repo.path / "config" / "beta" / "config.json").symlink_to(outside / "config.json")
    head = repo.commit("a symlinked config")
    proc = _diff(repo, base, head, "apps/")
    out = _no_leak(proc)
    assert proc.returncode != 0, out
    assert "config/beta/config.json" in out and "outside the repository" in out, out


# --- the release name is never a template -----------------------------------------------------

CHART = "apiVersion: v2\nname: web\nversion: 1.0.0\n"
CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"
TEMPLATED = '{{ env (printf "HTTPS%cPROXY" 95) }}'  # no "_": the release name drops a "<ns>_" prefix


def _application(name: str, path: str) -> dict[str, object]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": REPO_URL, "path": path, "plugin": {"name": "driftguard"}},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "apps"},
        },
    }


def test_an_application_name_is_not_evaluated_as_helms_name_template(tmp_path: Path) -> None:
    """helm's --name-template is a Go template with sprig's env: the PR's Application name must not reach it."""
    repo = Repo(tmp_path / "gitops")
    repo.write("charts/web/Chart.yaml", CHART)
    repo.write("charts/web/templates/cm.yaml", CM)
    repo.write("apps/web.yaml", _application("web", "charts/web"))
    base = repo.commit("base")
    repo.write("apps/web.yaml", _application(TEMPLATED, "charts/web"))
    head = repo.commit("a templated name")
    proc = _diff(repo, base, head, "apps/", HTTPS_PROXY=PROXY)
    out = _no_leak(proc)
    assert proc.returncode != 0, out
    assert "is not a valid Helm release name" in out, out


def test_a_directory_name_is_not_evaluated_as_helms_name_template(tmp_path: Path) -> None:
    """`driftguard-cmp render <dir>` names the release after the directory, which the tenant names."""
    here = tmp_path / "checkout" / TEMPLATED
    (here / "templates").mkdir(parents=True)
    (tmp_path / "checkout" / ".git").mkdir()
    (here / "Chart.yaml").write_text(CHART)
    (here / "templates" / "cm.yaml").write_text(CM)
    env = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_HELM": os.environ["DRIFTGUARD_HELM"],
        "DRIFTGUARD_KUSTOMIZE": os.environ["DRIFTGUARD_KUSTOMIZE"],
        "HOME": str(tmp_path),
        "HTTPS_PROXY": PROXY,
    }
    proc = run_cmp(here, env, "render", str(here))
    out = _no_leak(proc)
    assert proc.returncode != 0, out
    assert out.startswith("driftguard: error: ") and "not a valid Helm release name" in out, out
    # a name helm accepts still renders, and the release carries it
    ok = run_cmp(here, env, "render", str(here), "--app-name", "web")
    assert ok.returncode == 0, ok.stderr


# --- kustomize: the files a generator or transformer config names -----------------------------


def _kustomize_config_attack(checkout: Path, outside: Path, field: str, config: str, layout: str) -> Path:
    """A kustomization naming a builtin plugin config: as a file, inline, or a directory of configs."""
    here = checkout / "apps" / "gen"
    here.mkdir(parents=True)
    text = config.format(outside=outside)
    if layout == "file":
        (here / "config.yaml").write_text(text)
        entry = "config.yaml"
    elif layout == "inline":
        entry = "|\n" + "".join(f"      {line}\n" for line in text.splitlines())
    else:
        (here / "plugins").mkdir()
        (here / "plugins" / "kustomization.yaml").write_text("resources:\n  - config.yaml\n")
        (here / "plugins" / "config.yaml").write_text(text)
        entry = "plugins"
    (here / "kustomization.yaml").write_text(f"{field}:\n  - {entry}\n")
    return here


GENERATOR = """apiVersion: builtin
kind: ConfigMapGenerator
metadata:
  name: loot
files:
  - t={outside}/token
"""
ENVS_GENERATOR = GENERATOR.replace("files:\n  - t=", "envs:\n  - ").replace("/token", "/env")
PATCH = """apiVersion: builtin
kind: PatchTransformer
metadata:
  name: loot
path: {outside}/patch.yaml
target:
  kind: ConfigMap
"""


@pytest.mark.parametrize(
    ("field", "config", "layout"),
    [
        ("generators", GENERATOR, "file"),
        ("generators", ENVS_GENERATOR, "file"),
        ("transformers", PATCH, "file"),
        ("generators", GENERATOR, "inline"),
        ("generators", GENERATOR, "directory"),
    ],
    ids=["generator-files", "generator-envs", "transformer-path", "inline-config", "directory-of-configs"],
)
def test_a_kustomize_plugin_config_naming_a_file_outside_is_refused_even_with_the_restrictor_open(
    tmp_path: Path, field: str, config: str, layout: str
) -> None:
    """The platform may open the load restrictor (DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR); the checkout
    confinement must still hold for the files a builtin generator's or transformer's config names."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "token").write_text(SECRET + "\n")
    (outside / "env").write_text(f"T={SECRET}\n")
    (outside / "patch.yaml").write_text(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  t: {SECRET}\n"
    )
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    here = _kustomize_config_attack(checkout, outside, field, config, layout)
    (here / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n")
    with (here / "kustomization.yaml").open("a") as f:
        f.write("resources:\n  - cm.yaml\n")
    env = cmp_env("apps/gen", None, DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR="LoadRestrictionsNone")
    env["DRIFTGUARD_CMP_CACHE_DIR"] = str(tmp_path / "cache")
    proc = run_cmp(here, env, "generate")
    out = _no_leak(proc)
    assert proc.returncode != 0, out
    first = proc.stderr.splitlines()[0]
    assert first.startswith("driftguard: ") and "outside the repository checkout" in first, out
    assert "config refers to" in first, out


def test_a_kustomize_plugin_config_naming_files_inside_still_renders(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    here = _kustomize_config_attack(
        checkout, tmp_path, "generators", GENERATOR.replace("{outside}/token", "data/token"), "inline"
    )
    (here / "data").mkdir()
    (here / "data" / "token").write_text("in-repo\n")
    env = cmp_env("apps/gen", None, DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR="LoadRestrictionsNone")
    env["DRIFTGUARD_CMP_CACHE_DIR"] = str(tmp_path / "cache")
    proc = run_cmp(here, env, "generate")
    assert proc.returncode == 0, proc.stderr
    assert "in-repo" in proc.stdout and "name: loot" in proc.stdout


# --- the content cache cannot be made to fill the sidecar's disk ------------------------------

MAX_CACHE_ENTRY = 4 << 20
"""docs/security.md: no content-cache entry is larger than 4 MiB."""


def _alias_bomb(variant: int) -> str:
    """1.5 KB of YAML that PyYAML loads as shared references and JSON writes out as ~10 MB."""
    lines = ["enabled: true", f'l0: &l0 "{variant}' + "x" * 1000 + '"']
    for i in range(1, 4):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 10) + "]")
    lines.append("top: [" + ",".join(["*l3"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_a_values_alias_bomb_does_not_write_huge_content_cache_entries(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    here = checkout / "apps" / "bomb"
    (here / "templates").mkdir(parents=True)
    (here / "Chart.yaml").write_text(CHART)
    (here / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n{{- if .Values.enabled }}\ndata: {}\n{{- end }}\n"
    )
    cache = tmp_path / "cache"
    for variant in range(2):  # each new content would be one more entry
        (here / "values.yaml").write_text(_alias_bomb(variant))
        env = cmp_env("apps/bomb", None)
        env["DRIFTGUARD_CMP_CACHE_DIR"] = str(cache)
        proc = run_cmp(here, env, "generate")
        assert proc.returncode == 0 or proc.stderr.startswith("driftguard: "), proc.stderr[-2000:]
    sizes = {p.name: p.stat().st_size for p in cache.iterdir()}
    assert sizes and max(sizes.values()) <= MAX_CACHE_ENTRY, sizes
    assert sum(sizes.values()) <= 2 * MAX_CACHE_ENTRY, sizes


# --- the PR check: one Application name, one definition ---------------------------------------


def test_a_second_application_of_the_same_name_cannot_hide_a_destructive_change(tmp_path: Path) -> None:
    """Argo CD keeps one of two same-named Applications (the later one, with a RepeatedResourceWarning);
    which one the PR check would have kept is not a guess to make: the duplicate is refused."""
    repo = Repo(tmp_path / "gitops")
    repo.write("web/manifests.yaml", configmaps(*(f"web-{i}" for i in range(5))))
    repo.write("small/manifests.yaml", configmaps("web-0"))
    repo.write("apps/web-production.yaml", _application("web-production", "web"))
    base = repo.commit("base")
    repo.write("apps/web-production.yaml", _application("web-production", "small"))  # drops 4
    repo.write("apps/aa.yml", _application("web-production", "web"))  # the decoy, read after
    head = repo.commit("re-point production, plus a decoy")
    proc = _diff(repo, base, head, "apps/", "--fail-on-removal", "*-production")
    out = _no_leak(proc)
    assert proc.returncode != 0, out
    assert "web-production" in out and "apps/aa.yml" in out and "apps/web-production.yaml" in out, out


def test_a_symlinked_application_manifest_out_of_the_checkout_is_not_read(tmp_path: Path) -> None:
    """A PR may commit apps/x.yaml as a symlink to a file of the CI runner (another checkout's Application)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "app.yaml").write_text(yaml_dump(_application(SECRET, "web")))
    repo = Repo(tmp_path / "gitops")
    repo.write("web/manifests.yaml", configmaps("web-0"))
    repo.write("apps/web.yaml", _application("web", "web"))
    base = repo.commit("base")
    (repo.path / "apps" / "other.yaml").symlink_to(outside / "app.yaml")
    head = repo.commit("a symlinked manifest")
    proc = _diff(repo, base, head, "apps/")
    out = _no_leak(proc)
    assert proc.returncode != 0, out
    assert "apps/other.yaml" in out and "outside the repository checkout" in out, out


def test_a_matrix_of_aliased_lists_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """YAML aliases: a few KB of ApplicationSet, a matrix of 350 x 350 parameter sets (and far more
    with longer lists): refused while it is built, naming the generator and the limit."""
    elements = "[&e {team: alpha}" + ", *e" * 349 + "]"
    text = (
        "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: bomb\n  namespace: argocd\n"
        "spec:\n  generators:\n    - matrix:\n        generators:\n"
        f"          - list:\n              elements: &els {elements}\n"
        "          - list:\n              elements: *els\n"
        "  template:\n    metadata:\n      name: 'team-{{team}}'\n    spec:\n      project: default\n"
        f"      source: {{repoURL: '{REPO_URL}', path: web, plugin: {{name: driftguard}}}}\n"
        "      destination: {server: 'https://kubernetes.default.svc', namespace: apps}\n"
    )
    repo = Repo(tmp_path / "gitops")
    repo.write("web/manifests.yaml", configmaps("web-0"))
    repo.write("apps/web.yaml", _application("web", "web"))
    base = repo.commit("base")
    repo.write("apps/bomb.yaml", text)
    head = repo.commit("an aliased matrix")
    proc = _diff(repo, base, head, "apps/")
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "the matrix generator produces more than 100000 parameter sets" in proc.stdout + proc.stderr, (
        proc.stdout[-2000:] + proc.stderr[-2000:]
    )


# --- a values schema that refers outside the chart --------------------------------------------


def _schema_chart(tmp_path: Path, schema: Mapping[str, object], *, archive: bool = False) -> Path:
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    here = checkout / "apps" / "schema"
    (here / "templates").mkdir(parents=True)
    (here / "Chart.yaml").write_text(CHART)
    (here / "values.yaml").write_text('x: "nope"\n')
    (here / "templates" / "cm.yaml").write_text(CM)
    text = json.dumps(schema)
    if not archive:
        (here / "values.schema.json").write_text(text)
        return here
    sub = tmp_path / "sub"
    (sub / "templates").mkdir(parents=True)
    (sub / "Chart.yaml").write_text("apiVersion: v2\nname: sub\nversion: 1.0.0\n")
    (sub / "values.schema.json").write_text(text)
    (here / "charts").mkdir()
    with tarfile.open(here / "charts" / "sub-1.0.0.tgz", "w:gz") as tar:
        tar.add(sub, arcname="sub")
    return here


def _generate(here: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = cmp_env("apps/schema", None)
    env["DRIFTGUARD_CMP_CACHE_DIR"] = str(tmp_path / "cache")
    return run_cmp(here, env, "generate")


@pytest.mark.parametrize("archive", [False, True], ids=["chart", "subchart-archive"])
@pytest.mark.parametrize("scheme", ["file", "http", "id-base"])
def test_a_values_schema_referring_outside_the_chart_is_refused(
    tmp_path: Path, scheme: str, archive: bool
) -> None:
    """helm's schema loader follows file:// and http:// refs: a file of the sidecar came out in its
    validation error (enum), and an http ref is a GET to anything the sidecar can reach."""
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"type": "object", "properties": {"x": {"enum": [SECRET]}}}))
    schemas: dict[str, dict[str, object]] = {
        "file": {"$ref": outside.as_uri()},
        "http": {"$ref": "http://127.0.0.1:9/outside.json"},
        "id-base": {"$id": outside.parent.as_uri() + "/", "$ref": "outside.json"},
    }
    proc = _generate(_schema_chart(tmp_path, schemas[scheme], archive=archive), tmp_path)
    out = _no_leak(proc)
    assert proc.returncode != 0, out
    first = proc.stderr.splitlines()[0]
    assert first.startswith("driftguard: error: ") and "values.schema.json" in first, out
    assert "refers outside the schema" in first, out


def test_a_values_schema_with_its_own_definitions_still_validates(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "definitions": {"name": {"type": "string", "enum": ["nope"]}},
        "properties": {"x": {"$ref": "#/definitions/name"}, "id": {"type": "string"}, "$ref": {}},
    }
    proc = _generate(_schema_chart(tmp_path, schema), tmp_path)
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "checkout" / "apps" / "schema" / "values.yaml").write_text('x: "other"\n')
    refused = _generate(tmp_path / "checkout" / "apps" / "schema", tmp_path)
    # helm 4's message for a one-value enum
    assert refused.returncode != 0 and "at '/x': value must be 'nope'" in refused.stderr, refused.stderr

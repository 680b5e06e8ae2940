"""ApplicationSets in the PR diff: what a change to a generator, its inputs or its policy deletes.

Plain-directory apps (no helm) in a repository each test builds: one ApplicationSet over
``teams/*`` whose Applications render two ConfigMaps each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .gitrepo import REPO_URL, Repo, appset, configmaps, git_dirs

TEAMS = ("alpha", "beta", "gamma", "delta", "omega")


def teams_repo(tmp_path: Path, *, teams: tuple[str, ...] = TEAMS, **spec: Any) -> Repo:
    repo = Repo(tmp_path / "gitops")
    for team in teams:
        repo.write(f"teams/{team}/manifests.yaml", configmaps(f"{team}-a", f"{team}-b", namespace=team))
    repo.write(
        "apps/teams.yaml",
        appset("teams", [git_dirs("teams/*")], app_name="team-{{path.basename}}", path="{{path}}", **spec),
    )
    return repo


def report(proc: Any) -> dict[str, Any]:
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def envs(proc: Any) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in report(proc)["environments"]}


def test_a_removed_directory_deletes_its_application_and_prunes_everything(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path)
    base = repo.commit("base")
    repo.remove("teams/gamma")
    head = repo.commit("remove gamma")
    proc = repo.diff(base, head, "apps/", "--format", "json", "--fail-on-removal", "team-gamma")
    assert proc.returncode == 1
    first = report(proc)["environments"][0]
    assert first["name"] == "team-gamma" and first["status"] == "deleted"
    assert first["deletion"] == (
        "ApplicationSet teams stops generating it: git directory teams/gamma: the directory was removed"
    )
    assert [r["resource"] for r in first["removed"]] == ["ConfigMap gamma/gamma-a", "ConfigMap gamma/gamma-b"]
    assert first["removed"][0]["cause"].startswith("pruned with the Application: ApplicationSet teams")
    text = repo.diff(base, head, "apps/").stdout
    assert text.index("== team-gamma") < text.index("== team-alpha")
    assert (
        text.splitlines()[0]
        == "== team-gamma (teams/gamma): 2 removed, 0 added, 0 changed [Application deleted]"
    )


def test_an_excluded_directory_says_which_pattern_excluded_it(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path)
    base = repo.commit("base")
    repo.write(
        "apps/teams.yaml",
        appset(
            "teams",
            [git_dirs("teams/*", exclude=("teams/omega",))],
            app_name="team-{{path.basename}}",
            path="{{path}}",
        ),
    )
    head = repo.commit("exclude omega")
    e = envs(repo.diff(base, head, "apps/", "--format", "json"))["team-omega"]
    assert e["deletion"] == (
        "ApplicationSet teams stops generating it: git directory teams/omega: excluded by `teams/omega` (exclude: true)"
    )


def test_preserve_resources_on_deletion_and_the_policy_keep_the_resources(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path, syncPolicy={"preserveResourcesOnDeletion": True})
    base = repo.commit("base")
    repo.remove("teams/beta")
    head = repo.commit("remove beta")
    proc = repo.diff(base, head, "apps/", "--format", "json", "--fail-on-removal", "*")
    assert proc.returncode == 0, proc.stderr
    e = envs(proc)["team-beta"]
    assert e["status"] == "deleted" and e["removed"] == []
    assert [r["cause"] for r in e["kept"]] == [
        "the ApplicationSet sets syncPolicy.preserveResourcesOnDeletion: true"
    ] * 2

    repo2 = teams_repo(tmp_path / "second")
    base2 = repo2.commit("base")
    repo2.remove("teams/beta")
    head2 = repo2.commit("remove beta")
    for policy in ("create-only", "create-update"):
        kept = repo2.diff(
            base2, head2, "apps/", "--format", "json", "--policy", policy, "--fail-on-removal", "*"
        )
        assert kept.returncode == 0, kept.stderr
        assert envs(kept)["team-beta"]["kept"][0]["cause"].startswith(
            f"the ApplicationSet policy is {policy}"
        )
    pruned = repo2.diff(base2, head2, "apps/", "--policy", "create-delete", "--fail-on-removal", "team-beta")
    assert pruned.returncode == 1


def test_the_applicationsets_own_policy_counts_when_no_controller_policy_is_given(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path, syncPolicy={"applicationsSync": "create-update"})
    base = repo.commit("base")
    repo.remove("teams/beta")
    head = repo.commit("remove beta")
    assert repo.diff(base, head, "apps/", "--fail-on-removal", "*").returncode == 0
    # a controller started with --policy sync overrides it (override is off once --policy is set)
    assert repo.diff(base, head, "apps/", "--policy", "sync", "--fail-on-removal", "*").returncode == 1


def test_a_generator_that_shrinks_past_the_limit_fails_unless_allowed(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path)
    base = repo.commit("base")
    repo.remove("teams/alpha")
    repo.remove("teams/beta")
    head = repo.commit("remove two of five")
    proc = repo.diff(base, head, "apps/")
    assert proc.returncode == 1
    msg = "ApplicationSet teams would stop generating 2 of its 5 Applications (40% > --max-appset-shrink 20%)"
    assert proc.stdout.startswith("SHRINK: " + msg)
    assert f"driftguard: refused by appset-shrink: {msg}" in proc.stderr
    assert repo.diff(base, head, "apps/", "--allow-appset-shrink", "teams").returncode == 0
    assert repo.diff(base, head, "apps/", "--max-appset-shrink", "50%").returncode == 0


def test_losing_exactly_the_share_allowed_passes(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path)
    base = repo.commit("base")
    repo.remove("teams/alpha")
    head = repo.commit("remove one of five")
    proc = repo.diff(base, head, "apps/")
    assert proc.returncode == 0, proc.stderr  # 1 of 5 is 20%, not more than the 20% allowed
    assert "team-alpha" in proc.stdout and "SHRINK" not in proc.stdout
    assert repo.diff(base, head, "apps/", "--max-appset-shrink", "0.1").returncode == 1


def test_zero_applications_is_a_shrink_even_under_the_ratio(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path, teams=("alpha",))
    base = repo.commit("base")
    repo.write(
        "apps/teams.yaml",
        appset("teams", [git_dirs("team/*")], app_name="team-{{path.basename}}", path="{{path}}"),
    )
    head = repo.commit("typo in the generator path")
    proc = repo.diff(base, head, "apps/", "--max-appset-shrink", "100%", "--format", "json")
    assert proc.returncode == 1
    [finding] = report(proc)["findings"]
    assert finding == {
        "kind": "shrink",
        "applicationSet": "teams",
        "message": "ApplicationSet teams would generate zero Applications at head (it generates 1 at base)",
        "allowed": False,
    }
    deleted = envs(proc)["team-alpha"]
    assert deleted["deletion"].endswith(
        "git directory teams/alpha: the directory no longer matches the generator's paths"
    )


def test_another_repository_is_an_error_naming_it(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path)
    base = repo.commit("base")
    spec = appset("teams", [git_dirs("teams/*")], app_name="team-{{path.basename}}", path="{{path}}")
    spec["spec"]["generators"][0]["git"]["repoURL"] = "https://git.example.org/other/repo.git"
    repo.write("apps/teams.yaml", spec)
    head = repo.commit("other repo")
    proc = repo.diff(base, head, "apps/")
    assert proc.returncode == 2
    assert (
        "git generator repoURL https://git.example.org/other/repo.git is not this repository" in proc.stderr
    )
    # --repo-url says it is this one after all
    assert repo.diff(base, head, "apps/", "--repo-url", "https://git.example.org/other/repo").returncode == 0


@pytest.mark.parametrize(
    ("generator", "message"),
    [
        (
            {"pullRequest": {"github": {"owner": "o", "repo": "r"}}},
            "the pullRequest generator is not supported",
        ),
        ({"scmProvider": {"github": {"organization": "o"}}}, "the scmProvider generator is not supported"),
        ({"clusters": {}}, "a clusters generator needs the clusters Argo CD knows: pass --clusters FILE"),
        (
            {"list": {"elements": [{"count": 1}]}},
            "list element key count is not a string (fasttemplate mode)",
        ),
    ],
)
def test_what_cannot_be_expanded_is_an_error_naming_the_feature(
    tmp_path: Path, generator: dict[str, Any], message: str
) -> None:
    repo = teams_repo(tmp_path)
    base = repo.commit("base")
    repo.write("apps/other.yaml", appset("other", [generator], app_name="x-{{name}}", path="teams/alpha"))
    head = repo.commit("unsupported")
    proc = repo.diff(base, head, "apps/")
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "driftguard: error: 1 ApplicationSet(s) cannot be expanded at the head revision"
    )
    assert f"ApplicationSet other: {message}" in proc.stderr


def test_go_templates_are_evaluated_by_helm(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path, teams=("alpha", "beta_x"))
    go = appset(
        "go",
        [{"git": git_dirs("teams/*")["git"] | {"values": {"owner": "{{ .path.basename | upper }}"}}}],
        app_name="{{ .path.basenameNormalized }}-{{ index .path.segments 0 }}",
        path="{{ .path.path }}",
        goTemplate=True,
        goTemplateOptions=["missingkey=error"],
        templatePatch="metadata:\n  labels:\n    owner: {{ .values.owner | lower | quote }}\n",
    )
    repo.write("apps/teams.yaml", go)
    base = repo.commit("base")
    repo.remove("teams/beta_x")
    head = repo.commit("remove beta_x")
    proc = repo.diff(base, head, "apps/", "--format", "json", "--fail-on-removal", "beta-x-teams")
    assert proc.returncode == 1, proc.stderr
    e = envs(proc)
    assert sorted(e) == ["alpha-teams", "beta-x-teams"]
    assert e["alpha-teams"]["path"] == "teams/alpha"
    assert e["beta-x-teams"]["deletion"].endswith("git directory teams/beta_x: the directory was removed")
    assert [r["resource"] for r in e["beta-x-teams"]["removed"]] == [
        "ConfigMap beta_x/beta_x-a",
        "ConfigMap beta_x/beta_x-b",
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("{{ .nope }}", 'failed to execute go template {{ .nope }}: map has no entry for key "nope"'),
        (
            "{{ normalize .path.basename }}",
            "goTemplate: the function `normalize` is not supported by driftguard",
        ),
        ("{{ .path.basename | nosuchfn }}", 'goTemplate: parse error at function "nosuchfn" not defined'),
        ('{{ include "x" . }}', "goTemplate: `include` is a helm function, not one Argo CD provides"),
    ],
)
def test_go_template_errors_name_the_problem(tmp_path: Path, name: str, message: str) -> None:
    repo = teams_repo(tmp_path, teams=("alpha",))
    base = repo.commit("base")
    repo.write(
        "apps/go.yaml",
        appset(
            "go",
            [git_dirs("teams/*")],
            app_name=name,
            path="{{ .path.path }}",
            goTemplate=True,
            goTemplateOptions=["missingkey=error"],
        ),
    )
    head = repo.commit("go")
    proc = repo.diff(base, head, "apps/")
    assert proc.returncode == 2
    assert f"ApplicationSet go: {message}" in proc.stderr


def test_list_clusters_matrix_and_a_selector(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path, teams=("alpha", "beta"))
    repo.write(
        "clusters.yaml",
        [
            {"name": "prod-eu", "server": "https://prod-eu.example.com", "labels": {"env": "production"}},
            {"name": "stage", "server": "https://stage.example.com", "labels": {"env": "staging"}},
        ],
    )
    matrix = {
        "matrix": {
            "generators": [
                {"clusters": {"selector": {"matchLabels": {"env": "production"}}}},
                git_dirs("teams/*"),
            ]
        }
    }
    listed = {
        "list": {"elements": [{"team": "alpha", "tier": "gold"}, {"team": "beta", "tier": "bronze"}]},
        "selector": {"matchLabels": {"tier": "gold"}},
    }
    repo.write(
        "apps/matrix.yaml", appset("fleet", [matrix], app_name="{{path.basename}}-{{name}}", path="{{path}}")
    )
    repo.write("apps/gold.yaml", appset("gold", [listed], app_name="gold-{{team}}", path="teams/{{team}}"))
    base = repo.commit("base")
    head = repo.commit("nothing changes")
    proc = repo.diff(base, head, "apps/", "--clusters", str(repo.path / "clusters.yaml"), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert sorted(envs(proc)) == ["alpha-prod-eu", "beta-prod-eu", "gold-alpha", "team-alpha", "team-beta"]
    # the generator's cluster selector changes: no cluster matches, both Applications go
    matrix["matrix"]["generators"][0] = {"clusters": {"selector": {"matchLabels": {"env": "prod"}}}}
    repo.write(
        "apps/matrix.yaml", appset("fleet", [matrix], app_name="{{path.basename}}-{{name}}", path="{{path}}")
    )
    head = repo.commit("selector typo")
    gone = repo.diff(base, head, "apps/", "--clusters", str(repo.path / "clusters.yaml"), "--format", "json")
    assert gone.returncode == 1
    assert [f["message"] for f in report(gone)["findings"]] == [
        "ApplicationSet fleet would generate zero Applications at head (it generates 2 at base)"
    ]
    assert envs(gone)["alpha-prod-eu"]["deletion"] == (
        "ApplicationSet fleet stops generating it: cluster prod-eu: "
        "the cluster is no longer listed or no longer matches the generator's selector"
    )


def test_a_hand_written_application_removed_prunes_only_with_the_finalizer(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "gitops")
    repo.write("web/cm.yaml", configmaps("web"))
    app = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "web", "namespace": "argocd"},
        "spec": {"source": {"repoURL": REPO_URL, "path": "web"}, "destination": {"namespace": "apps"}},
    }
    repo.write("apps/web.yaml", app)
    repo.write("apps/keep.yaml", app | {"metadata": {"name": "keep"}})
    app["metadata"]["finalizers"] = ["resources-finalizer.argocd.argoproj.io"]
    repo.write("apps/web.yaml", app)
    base = repo.commit("base")
    repo.remove("apps/web.yaml")
    repo.remove("apps/keep.yaml")
    head = repo.commit("remove both")
    proc = repo.diff(base, head, "apps/", "--format", "json", "--fail-on-removal", "*")
    assert proc.returncode == 1
    e = envs(proc)
    assert (
        e["web"]["deletion"] == "the Application manifest is gone at head" and len(e["web"]["removed"]) == 1
    )
    assert e["keep"]["removed"] == [] and e["keep"]["kept"][0]["cause"].startswith(
        "the Application has no resources-finalizer"
    )


def test_a_files_generator_with_template_patch(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path, teams=("alpha", "beta"))
    for team, owner in (("alpha", "ops"), ("beta", "web")):
        repo.write(f"config/{team}/team.json", json.dumps({"owner": owner, "team": {"dir": f"teams/{team}"}}))
    files = {"git": {"repoURL": REPO_URL, "revision": "HEAD", "files": [{"path": "config/**/team.json"}]}}
    patch = "spec:\n  source:\n    path: '{{team.dir}}'\n"
    repo.write(
        "apps/teams.yaml",
        appset(
            "owners", [files], app_name="{{path.basename}}-{{owner}}", path="nowhere", templatePatch=patch
        ),
    )
    base = repo.commit("base")
    repo.remove("config/beta/team.json")
    head = repo.commit("beta has no owner")
    proc = repo.diff(base, head, "apps/", "--format", "json", "--allow-appset-shrink", "owners")
    assert proc.returncode == 0, proc.stderr
    e = envs(proc)
    assert sorted(e) == ["alpha-ops", "beta-web"]
    assert (
        e["alpha-ops"]["path"] == "teams/alpha"
        and e["alpha-ops"]["origin"] == "git file config/alpha/team.json"
    )
    assert e["beta-web"]["deletion"] == (
        "ApplicationSet owners stops generating it: git file config/beta/team.json: the file was removed"
    )
    assert len(e["beta-web"]["removed"]) == 2
    [shrink] = report(proc)["findings"]
    assert shrink["allowed"] is True and "stop generating 1 of its 2" in shrink["message"]


def test_a_renamed_application_is_a_deletion_and_a_creation(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path, teams=("alpha", "beta", "gamma", "delta", "omega"))
    base = repo.commit("base")
    repo.write(
        "apps/teams.yaml",
        appset("teams", [git_dirs("teams/*")], app_name="t-{{path.basename}}", path="{{path}}"),
    )
    head = repo.commit("rename")
    proc = repo.diff(base, head, "apps/", "--format", "json", "--fail-on-removal", "team-alpha")
    assert proc.returncode == 1
    e = envs(proc)
    assert e["team-alpha"]["deletion"] == (
        "ApplicationSet teams stops generating it: git directory teams/alpha now generates t-alpha (the name template changed)"
    )
    assert e["t-alpha"]["status"] == "created"
    # a rename deletes every old Application (and prunes it) before the new ones exist: a shrink
    assert (
        "refused by appset-shrink: ApplicationSet teams would stop generating 5 of its 5 Applications"
        in proc.stderr
    )


def test_a_list_generator_pointing_at_stray_output_and_a_name_clash(tmp_path: Path) -> None:
    repo = teams_repo(tmp_path, teams=("alpha",))
    base = repo.commit("base")
    repo.write("teams/alpha/kustomize-build/out.yaml", configmaps("stale", namespace="alpha"))
    listed = {"list": {"elements": [{"dir": "teams/alpha/kustomize-build"}]}}
    repo.write("apps/stale.yaml", appset("stale", [listed], app_name="stale-alpha", path="{{dir}}"))
    head = repo.commit("a list element names render output")
    proc = repo.diff(base, head, "apps/stale.yaml")
    assert proc.returncode == 1
    assert (
        "refused by appset-stray: ApplicationSet stale spec.generators[0] (list) would create Application "
        "stale-alpha from teams/alpha/kustomize-build, which looks like committed render output"
    ) in proc.stderr
    clash = {"list": {"elements": [{"team": "alpha"}]}}
    repo.write("apps/clash.yaml", appset("clash", [clash], app_name="team-{{team}}", path="teams/alpha"))
    again = repo.commit("a second ApplicationSet makes team-alpha too")
    proc = repo.diff(base, again, "apps/")
    assert proc.returncode == 2
    assert any(
        f"ApplicationSet {a} generates Application team-alpha, which {b} also defines" in proc.stderr
        for a, b in (("teams", "clash"), ("clash", "teams"))
    )

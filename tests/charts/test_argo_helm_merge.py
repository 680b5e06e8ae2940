"""driftguard merged into a team's argo-helm values (scripts/argo_helm_values.py --merge-with), rendered
with the real argo-cd chart (tests/data/charts/argo-cd): everything of the team's survives.

The team's values (tests/charts/data/team-argocd-values.yaml) carry an argocd-vault-plugin sidecar,
Slack subscriptions, a controller argument and objects of their own; the notifications catalog's
triggers and templates come from Argo CD v3.5.1 itself (tests/reference/argo-cd/notifications-catalog.yaml).
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import examples

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "tests" / "data" / "charts" / "argo-cd"
SCRIPT = ROOT / "scripts" / "argo_helm_values.py"
TEAM = Path(__file__).parent / "data" / "team-argocd-values.yaml"
CATALOG = ROOT / "tests" / "reference" / "argo-cd" / "notifications-catalog.yaml"
OURS = ROOT / "examples" / "argo-helm" / "values.yaml"
Objects = dict[tuple[str, str], dict[str, Any]]


@functools.cache
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("argo_helm_values", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def team_values() -> dict[str, Any]:
    team = yaml.safe_load(TEAM.read_text())
    catalog = yaml.safe_load(CATALOG.read_text())["data"]
    team["notifications"]["triggers"] = {k: v for k, v in catalog.items() if k.startswith("trigger.")}
    team["notifications"]["templates"] = {k: v for k, v in catalog.items() if k.startswith("template.")}
    return dict(team)


def merge(*files: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(SCRIPT), "--merge-with", *map(str, files)]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def helm_template(*files: Path) -> Objects:
    cmd = [os.environ["DRIFTGUARD_HELM"], "template", "argocd", str(CHART), "-n", "argocd"]
    for f in files:
        cmd += ["-f", str(f)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}


@functools.cache
def renders() -> tuple[Objects, Objects, dict[str, Any], str]:
    """(the team alone, the team with driftguard merged, the overlay, what the merge said)."""
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="argo-helm-merge-"))
    team = work / "team.yaml"
    team.write_text(yaml.safe_dump(team_values(), sort_keys=False))
    out = merge(team)
    assert out.returncode == 0, out.stderr
    overlay = work / "driftguard.yaml"
    overlay.write_text(out.stdout)
    return helm_template(team), helm_template(team, overlay), yaml.safe_load(out.stdout), out.stderr


def contained(theirs: Any, merged: Any, where: str) -> None:
    """Everything in `theirs` is in `merged`: maps key by key, list items by name (or whole); an
    empty map of theirs (null, as a template writes an empty `stringData:`) may have grown."""
    if theirs is None and isinstance(merged, dict):
        return
    if isinstance(theirs, dict):
        assert isinstance(merged, dict), where
        for key, value in theirs.items():
            if str(key).startswith("checksum/"):
                continue  # argo-helm's restart-on-change annotations: a hash of the config maps
            assert key in merged, f"{where}.{key} is gone"
            contained(value, merged[key], f"{where}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(merged, list), where
        named = {i.get("name"): i for i in merged if isinstance(i, dict) and "name" in i}
        for item in theirs:
            if isinstance(item, dict) and "name" in item:
                assert item["name"] in named, f"{where}: {item['name']} is gone"
                contained(item, named[item["name"]], f"{where}[{item['name']}]")
            else:
                assert item in merged, f"{where}: {item!r} is gone"
    else:
        assert theirs == merged, f"{where}: {theirs!r} became {merged!r}"


@pytest.mark.slow  # a real chart merged and rendered
def test_everything_of_the_teams_survives_the_merge() -> None:
    alone, merged, _, _ = renders()
    for key, obj in alone.items():
        assert key in merged, key
        if key == ("ConfigMap", "argocd-notifications-cm"):
            obj = copy.deepcopy(obj)
            subs = yaml.safe_load(obj["data"].pop("subscriptions"))
            assert all(s in yaml.safe_load(merged[key]["data"]["subscriptions"]) for s in subs)
        contained(obj, merged[key], f"{key[0]}/{key[1]}")


@pytest.mark.slow  # the real argo-cd chart rendered
def test_the_avp_sidecar_and_its_token_stay_as_the_team_has_them() -> None:
    alone, merged, _, _ = renders()
    pod = merged[("Deployment", "argocd-repo-server")]["spec"]["template"]["spec"]
    kubernetes_validate.validate(merged[("Deployment", "argocd-repo-server")], "1.32", strict=True)
    containers = {c["name"]: c for c in pod["containers"]}
    team_pod = alone[("Deployment", "argocd-repo-server")]["spec"]["template"]["spec"]
    assert containers["avp"] == next(c for c in team_pod["containers"] if c["name"] == "avp")
    assert pod["automountServiceAccountToken"] is True  # AVP's Vault login needs it
    assert pod["initContainers"] == team_pod["initContainers"]
    assert set(containers) == {"repo-server", "avp", "driftguard-cmp"}
    # both plugins' configs in the one argocd-cmp-cm
    cm = merged[("ConfigMap", "argocd-cmp-cm")]["data"]
    assert cm["avp.yaml"] == alone[("ConfigMap", "argocd-cmp-cm")]["data"]["avp.yaml"]
    assert yaml.safe_load(cm["driftguard.yaml"])["metadata"]["name"] == "driftguard"


@pytest.mark.slow  # the real argo-cd chart rendered
def test_driftguards_pieces_arrive_beside_the_teams() -> None:
    _, merged, _, said = renders()
    ours = yaml.safe_load(OURS.read_text())
    pod = merged[("Deployment", "argocd-repo-server")]["spec"]["template"]["spec"]
    [sidecar] = [c for c in pod["containers"] if c["name"] == "driftguard-cmp"]
    assert sidecar == ours["repoServer"]["extraContainers"][0]
    assert {m["name"] for c in pod["containers"] for m in c.get("volumeMounts", [])} <= {
        v["name"] for v in pod["volumes"]
    }
    args = merged[("StatefulSet", "argocd-application-controller")]["spec"]["template"]["spec"]["containers"][
        0
    ]["args"]
    assert "--self-heal-timeout-seconds=10" in args
    assert "--metrics-application-conditions=ComparisonError" in args
    cm = merged[("ConfigMap", "argocd-notifications-cm")]["data"]
    team_triggers = team_values()["notifications"]["triggers"]
    # a name both ship is the team's: kept, and named by the merge (collisions computed here on
    # their own, from the two files)
    collisions = {
        k
        for k, v in ours["notifications"]["triggers"].items()
        if k in team_triggers and team_triggers[k] != v
    }
    for key, value in {**ours["notifications"]["templates"], **ours["notifications"]["notifiers"]}.items():
        assert cm[key] == value, key
    for key, value in ours["notifications"]["triggers"].items():
        assert cm[key] == (team_triggers[key] if key in collisions else value), key
        if key in collisions:
            assert key in said, said
    subs = yaml.safe_load(cm["subscriptions"])
    [driftguard] = [s for s in subs if s["recipients"] == ["driftguard:alerts"]]
    [shipped] = ours["notifications"]["subscriptions"]
    assert set(driftguard["triggers"]) == set(shipped["triggers"]) - {
        k.removeprefix("trigger.") for k in collisions
    }
    assert ("Role", "driftguard-cmp-read-applications") in merged
    assert ("ConfigMap", "team-dashboards") in merged


@pytest.mark.slow  # the real argo-cd chart rendered
def test_merging_again_adds_nothing(tmp_path: Path) -> None:
    _, _, overlay, _ = renders()
    team = tmp_path / "team.yaml"
    team.write_text(yaml.safe_dump(team_values()))
    first = tmp_path / "driftguard.yaml"
    first.write_text(yaml.safe_dump(overlay))
    again = merge(team, first)
    assert again.returncode == 0, again.stderr
    assert yaml.safe_load(again.stdout) == {}


def test_a_new_install_gets_the_shipped_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    out = merge(empty)
    assert out.returncode == 0 and not out.stderr
    assert yaml.safe_load(out.stdout) == yaml.safe_load(OURS.read_text())


def test_an_earlier_driftguard_in_the_teams_values_is_replaced(tmp_path: Path) -> None:
    team = team_values()
    old = copy.deepcopy(yaml.safe_load(OURS.read_text())["repoServer"]["extraContainers"][0])
    old["image"] = "registry.example.com/platform/driftguard:0.0.9"
    team["repoServer"]["extraContainers"].append(old)
    path = tmp_path / "team.yaml"
    path.write_text(yaml.safe_dump(team))
    out = merge(path)
    containers = yaml.safe_load(out.stdout)["repoServer"]["extraContainers"]
    assert [c["name"] for c in containers] == ["avp", "driftguard-cmp"]
    assert containers[1]["image"].endswith(":0.1.0")


def test_a_scalar_of_the_teams_is_kept_and_named(tmp_path: Path) -> None:
    team = team_values()
    team["configs"]["cmp"]["create"] = False  # they manage argocd-cmp-cm themselves
    path = tmp_path / "team.yaml"
    path.write_text(yaml.safe_dump(team))
    out = merge(path)
    assert out.returncode == 0
    assert "configs.cmp.create" in out.stderr
    assert "create" not in (yaml.safe_load(out.stdout)["configs"]["cmp"])


def test_values_files_coalesce_as_helm_reads_them(tmp_path: Path) -> None:
    # two files of the team's: the second replaces the first's list (helm's rule), so the merge
    # must keep the second's sidecars and not resurrect the first's
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(yaml.safe_dump({"repoServer": {"extraContainers": [{"name": "old", "image": "x"}]}}))
    second.write_text(yaml.safe_dump({"repoServer": {"extraContainers": [{"name": "avp", "image": "y"}]}}))
    out = merge(first, second)
    names = [c["name"] for c in yaml.safe_load(out.stdout)["repoServer"]["extraContainers"]]
    assert names == ["avp", "driftguard-cmp"]


# --- the merge rule over generated values, against helm's coalescing written from its source ------

NAMES = st.sampled_from(["avp", "sops", "driftguard-cmp", "tmp-dir", "argocd-cmp-cm", "driftguard-cmp-tmp"])
ITEMS = st.fixed_dictionaries({"name": NAMES, "image": st.sampled_from(["a", "b"])})
KEYS = st.sampled_from(
    ["trigger.on-sync-failed", "trigger.on-deployed", "template.x", "trigger.driftguard-a"]
)
VALUES = st.fixed_dictionaries(
    {},
    optional={
        "repoServer": st.fixed_dictionaries(
            {},
            optional={
                "extraContainers": st.lists(ITEMS, max_size=4, unique_by=lambda i: i["name"]),
                "volumes": st.lists(ITEMS, max_size=4, unique_by=lambda i: i["name"]),
                "automountServiceAccountToken": st.booleans(),
            },
        ),
        "notifications": st.fixed_dictionaries(
            {},
            optional={
                "triggers": st.dictionaries(KEYS, st.sampled_from(["x", "y"]), max_size=4),
                "subscriptions": st.lists(
                    st.fixed_dictionaries(
                        {"recipients": st.just(["slack:a"]), "triggers": st.just(["on-x"])}
                    ),
                    max_size=1,
                ),
            },
        ),
        "controller": st.fixed_dictionaries(
            {}, optional={"extraArgs": st.lists(st.sampled_from(["--a", "--b"]))}
        ),
    },
)


def helm_coalesce(base: Any, over: Any) -> Any:
    """helm's pkg/chartutil/coalesce.go for user values files: a map merges key by key (recursively);
    any other value, a list included, replaces; a null deletes the key."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = helm_coalesce(base.get(k), v) if k in base else v
        return out
    return over


@settings(max_examples=examples(300), deadline=None)
@given(theirs=VALUES, ours=VALUES)
def test_the_merge_never_changes_theirs_and_adds_all_of_ours_it_can(
    theirs: dict[str, Any], ours: dict[str, Any]
) -> None:
    module = script()
    notes: list[str] = []
    result = helm_coalesce(theirs, module.merge(copy.deepcopy(theirs), ours, (), notes))
    owned = module.owned
    # theirs: every leaf kept, unless it is driftguard's own name (replaced by this version)
    for section, sub in theirs.items():
        for key, value in sub.items():
            if isinstance(value, list):
                for item in value:
                    named = isinstance(item, dict) and "name" in item
                    if not named or not owned(item["name"]):
                        assert item in result[section][key]
            elif isinstance(value, dict):
                for k, v in value.items():
                    assert owned(k) or result[section][key][k] == v
            else:
                assert result[section][key] == value
    # ours: present unless the team has a different thing of that name that is not driftguard's
    for section, sub in ours.items():
        for key, value in sub.items():
            mine = theirs.get(section, {}).get(key)
            if isinstance(value, list):
                for item in value:
                    clash = isinstance(mine, list) and any(
                        isinstance(m, dict)
                        and isinstance(item, dict)
                        and m.get("name") == item.get("name")
                        and m != item
                        for m in mine
                    )
                    if not clash or (isinstance(item, dict) and owned(item.get("name", ""))):
                        assert item in result[section][key]
            elif isinstance(value, dict):
                for k, v in value.items():
                    if mine is None or k not in mine or owned(k):
                        assert result[section][key][k] == v
            elif mine is None:
                assert result[section][key] == value


@pytest.mark.parametrize("key", ["trigger.on-sync-failed"])
def test_the_property_would_catch_a_merge_that_overwrites(key: str) -> None:
    # what `-f examples/argo-helm/values.yaml` after the team's values did: ours replaces theirs
    theirs = {"notifications": {"triggers": {key: "theirs"}}}
    ours = {"notifications": {"triggers": {key: "ours"}}}
    assert helm_coalesce(theirs, ours)["notifications"]["triggers"][key] == "ours"
    notes: list[str] = []
    overlay = script().merge(theirs, ours, (), notes)
    assert helm_coalesce(theirs, overlay)["notifications"]["triggers"][key] == "theirs" and notes

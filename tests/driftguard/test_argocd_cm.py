"""The one argocd-cm loader: a file or the ConfigMap mounted as a directory, read as Argo CD reads ``data``.

The notifier and the analysis provider each had a copy and the copies differed; these tests pin
what they now share (argo-cd v3.5.1 util/settings/settings.go reads ``argoCDCM.Data``, every key of
it; k8s.io/apimachinery ``IsConfigMapKey`` lets a key start with one dot, never with two).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from driftguard.argocd_cm import SETTING, load_argocd_cm, system_rules_from_file
from driftguard.errors import ConfigError

RULE = "jsonPointers:\n- /spec/replicas\n"
KEY = "resource.customizations.ignoreDifferences.apps_Deployment"


def kubelet_mount(where: Path, data: dict[str, str]) -> Path:
    """A ConfigMap volume as the kubelet writes it: the keys are symlinks into ``..data``."""
    where.mkdir()
    stamp = where / "..2026_12_04_10_00_00.000000001"
    stamp.mkdir()
    for key, value in data.items():
        (stamp / key).write_text(value)
    os.symlink(stamp.name, where / "..data")
    for key in data:
        os.symlink(f"..data/{key}", where / key)
    return where


def test_a_mounted_configmap_reads_every_key_and_none_of_the_kubelets_entries(tmp_path: Path) -> None:
    mount = kubelet_mount(tmp_path / "cm", {KEY: RULE, ".hidden": "x", "url": "https://argocd.example.com"})
    # the notifier's copy dropped ".hidden" (a valid key: Argo CD sees it in Data)
    assert load_argocd_cm(mount) == {KEY: RULE, ".hidden": "x", "url": "https://argocd.example.com"}
    [rule] = system_rules_from_file(str(mount))
    assert (rule.group, rule.kind, rule.json_pointers) == ("apps", "Deployment", ("/spec/replicas",))


def test_the_file_and_the_mounted_directory_give_the_same_rules(tmp_path: Path) -> None:
    data = {KEY: RULE, "resource.compareoptions": "ignoreAggregatedRoles: true\n"}
    mount = kubelet_mount(tmp_path / "cm", data)
    file = tmp_path / "argocd-cm.yaml"
    file.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-cm}\ndata:\n"
        + "".join(
            f"  {k}: |\n" + "".join(f"    {line}\n" for line in v.splitlines()) for k, v in data.items()
        )
    )
    assert system_rules_from_file(str(file)) == system_rules_from_file(str(mount))
    assert len(system_rules_from_file(str(file))) == 2


def test_a_file_of_several_documents_is_refused_not_cut_to_its_first(tmp_path: Path) -> None:
    # the analysis provider's copy took the first document and dropped the rest silently
    file = tmp_path / "argocd-cm.yaml"
    file.write_text(f"data:\n  {KEY}: '{{}}'\n---\ndata: {{}}\n")
    with pytest.raises(ConfigError, match="expected one ConfigMap, found 2 documents") as err:
        system_rules_from_file(str(file))
    assert err.value.setting == SETTING


def test_a_path_that_is_not_there_is_a_config_error_naming_the_setting(tmp_path: Path) -> None:
    # the analysis provider's copy let a bare OSError out (a traceback at start-up)
    with pytest.raises(ConfigError, match="does not exist") as err:
        system_rules_from_file(str(tmp_path / "missing"), setting="--argocd-cm")
    assert err.value.setting == "--argocd-cm"


def test_a_bad_rule_is_a_config_error(tmp_path: Path) -> None:
    mount = kubelet_mount(tmp_path / "cm", {KEY: "jsonPointers: [\n"})
    with pytest.raises(ConfigError, match="invalid YAML") as err:
        system_rules_from_file(str(mount))
    assert err.value.setting == SETTING


def test_no_path_no_rules() -> None:
    assert system_rules_from_file("") == []

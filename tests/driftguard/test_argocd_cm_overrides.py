"""argocd-cm's resource overrides merged as Argo CD merges them: the block, then the split keys.

The cases re-express argo-cd v3.5.1 util/settings/settings_test.go (``TestGetResourceOverrides``,
``TestGetResourceOverridesHealthWithWildcard``, ``..._with_empty_string``,
``TestGetResourceOverrides_with_splitted_keys``, ``TestConvertToOverrideKey``); the property test
holds the loader to a small model written from settings.go ``GetResourceOverrides`` /
``appendResourceOverridesFromSplitKeys`` / ``convertToOverrideKey`` and util/argo/normalizers
``getGroupKindForOverrideKey``. Upstream's status rule (``/status`` on ``*/*``) is not part of the
merge here: driftguard applies ``ignoreResourceStatusField`` in normalize.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from driftguard.argocd_cm import (
    ResourceOverride,
    override_key,
    resource_overrides,
    rules_from_argocd_cm,
    system_rules_from_file,
)
from driftguard.errors import ConfigError, InputError
from driftguard.ignore import IgnoreRules

P = "resource.customizations"
WEBHOOK = "admissionregistration.k8s.io/MutatingWebhookConfiguration"


def diff_of(override: ResourceOverride) -> tuple[tuple[str, ...], ...]:
    d = override.ignore_differences
    return ((), (), ()) if d is None else (d.json_pointers, d.jq_path_expressions, d.managed_fields_managers)


def known_of(override: ResourceOverride) -> tuple[tuple[str, str], ...]:
    k = override.known_type_fields
    return () if k is None else k.known_type_fields


# --- upstream's cases, re-expressed ---------------------------------------------------------------


def test_the_block_alone_gives_ignore_differences_and_ignore_resource_updates() -> None:
    block = {
        WEBHOOK: {
            "ignoreDifferences": "jsonPointers:\n- /webhooks/0/clientConfig/caBundle\n"
            "jqPathExpressions:\n- .webhooks[0].clientConfig.caBundle\n",
            "ignoreResourceUpdates": "jsonPointers:\n- /webhooks/1/clientConfig/caBundle\n"
            "jqPathExpressions:\n- .webhooks[1].clientConfig.caBundle\n",
        }
    }
    overrides = resource_overrides({P: yaml.safe_dump(block)})
    assert list(overrides) == [WEBHOOK]
    webhook = overrides[WEBHOOK]
    assert diff_of(webhook) == (
        ("/webhooks/0/clientConfig/caBundle",),
        (".webhooks[0].clientConfig.caBundle",),
        (),
    )
    assert webhook.ignore_resource_updates == (
        ("/webhooks/1/clientConfig/caBundle",),
        (".webhooks[1].clientConfig.caBundle",),
        (),
    )
    assert (webhook.health_lua, webhook.use_open_libs, webhook.actions, known_of(webhook)) == (
        "",
        False,
        "",
        (),
    )


def test_a_wildcard_block_key_is_kept_as_written() -> None:
    overrides = resource_overrides({P: '"*.aws.crossplane.io/*":\n  health.lua: |\n    foo\n'})
    assert overrides["*.aws.crossplane.io/*"].health_lua == "foo\n"


def test_an_empty_block_gives_no_override() -> None:
    # upstream counts one: the */* status rule, which driftguard keeps in normalize.py
    assert resource_overrides({P: ""}) == {}
    assert rules_from_argocd_cm({P: ""}) == []


BLOCK = f"""
{WEBHOOK}:
  ignoreDifferences: |
    jsonPointers:
    - /foo
  ignoreResourceUpdates: |
    jsonPointers:
    - foo
certmanager.k8s.io/Certificate:
  health.lua.useOpenLibs: true
  health.lua: |
    foo
cert-manager.io/Certificate:
  health.lua: |
    foo
apps/Deployment:
  actions: |
    foo
"""


def test_the_block_of_four_kinds_as_upstream_reads_it() -> None:
    overrides = resource_overrides({"resource.compareoptions": "ignoreResourceStatusField: none", P: BLOCK})
    assert len(overrides) == 4
    assert diff_of(overrides[WEBHOOK])[0] == ("/foo",)
    assert overrides[WEBHOOK].ignore_resource_updates[0] == ("foo",)
    assert overrides["certmanager.k8s.io/Certificate"].health_lua == "foo\n"
    assert overrides["certmanager.k8s.io/Certificate"].use_open_libs is True
    assert overrides["cert-manager.io/Certificate"].health_lua == "foo\n"
    assert overrides["cert-manager.io/Certificate"].use_open_libs is False
    assert overrides["apps/Deployment"].actions == "foo\n"


def test_split_keys_replace_the_blocks_fields_and_add_kinds() -> None:
    # upstream's ignoreDifferences pointers are "foo"/"bar"; driftguard refuses a pointer without
    # a leading "/" (IgnoreRule.from_dict), so they are "/foo"/"/bar" here
    split = {
        f"{P}.health.admissionregistration.k8s.io_MutatingWebhookConfiguration": "bar",
        f"{P}.ignoreDifferences.admissionregistration.k8s.io_MutatingWebhookConfiguration": "jsonPointers:\n- /bar\n",
        f"{P}.ignoreResourceUpdates.admissionregistration.k8s.io_MutatingWebhookConfiguration": "jsonPointers:\n- bar\n",
        f"{P}.knownTypeFields.admissionregistration.k8s.io_MutatingWebhookConfiguration": "- field: foo\n  type: bar\n",
        f"{P}.health.certmanager.k8s.io_Certificate": "bar",
        f"{P}.health.cert-manager.io_Certificate": "bar",
        f"{P}.useOpenLibs.certmanager.k8s.io_Certificate": "false",
        f"{P}.useOpenLibs.cert-manager.io_Certificate": "true",
        f"{P}.actions.apps_Deployment": "bar",
        f"{P}.actions.Deployment": "bar",
        f"{P}.health.iam-manager.k8s.io_Iamrole": "bar",
        f"{P}.health.Iamrole": "bar",
        f"{P}.ignoreDifferences.iam-manager.k8s.io_Iamrole": "jsonPointers:\n- /bar\n",
        f"{P}.ignoreDifferences.apps_Deployment": "jqPathExpressions:\n- bar\n",
        f"{P}.ignoreDifferences.all": "managedFieldsManagers:\n- kube-controller-manager\n- argo-rollouts\n",
        f"{P}.ignoreResourceUpdates.iam-manager.k8s.io_Iamrole": "jsonPointers:\n- bar\n",
        f"{P}.ignoreResourceUpdates.apps_Deployment": "jqPathExpressions:\n- bar\n",
    }
    overrides = resource_overrides(
        {"resource.compareoptions": "ignoreResourceStatusField: none", P: BLOCK, **split}
    )
    assert sorted(overrides) == sorted(
        [
            WEBHOOK,
            "certmanager.k8s.io/Certificate",
            "cert-manager.io/Certificate",
            "apps/Deployment",
            "Deployment",
            "iam-manager.k8s.io/Iamrole",
            "Iamrole",
            "*/*",
        ]
    )
    webhook = overrides[WEBHOOK]
    assert diff_of(webhook) == (("/bar",), (), ())  # replaced, not ("/foo", "/bar")
    assert webhook.ignore_resource_updates == (("bar",), (), ())
    assert known_of(webhook) == (("foo", "bar"),)
    assert webhook.health_lua == "bar"
    assert overrides["certmanager.k8s.io/Certificate"].health_lua == "bar"
    assert overrides["certmanager.k8s.io/Certificate"].use_open_libs is False  # the block said true
    assert overrides["cert-manager.io/Certificate"].use_open_libs is True
    assert overrides["apps/Deployment"].actions == overrides["Deployment"].actions == "bar"
    assert overrides["iam-manager.k8s.io/Iamrole"].health_lua == overrides["Iamrole"].health_lua == "bar"
    assert diff_of(overrides["iam-manager.k8s.io/Iamrole"])[0] == ("/bar",)
    assert diff_of(overrides["apps/Deployment"]) == ((), ("bar",), ())
    assert diff_of(overrides["*/*"])[2] == ("kube-controller-manager", "argo-rollouts")
    assert overrides["iam-manager.k8s.io/Iamrole"].ignore_resource_updates[0] == ("bar",)
    assert overrides["apps/Deployment"].ignore_resource_updates[1] == ("bar",)


@pytest.mark.parametrize(
    ("group_kind", "key"),
    [
        ("cert-manager.io_Certificate", "cert-manager.io/Certificate"),
        ("Certificate", "Certificate"),
        ("_", "/"),
    ],
)
def test_override_keys_from_group_kind(group_kind: str, key: str) -> None:
    assert override_key(group_kind) == key


@pytest.mark.parametrize("group_kind", ["", "a_b_c"])
def test_a_group_kind_upstream_refuses(group_kind: str) -> None:
    with pytest.raises(InputError, match="group kind should be in format"):
        override_key(group_kind)
    with pytest.raises(InputError, match=f"{P}.health.{group_kind}"):
        resource_overrides({f"{P}.health.{group_kind}": "x"})


# --- what the merge means for the rules driftguard applies ----------------------------------------


def test_a_split_ignore_differences_replaces_the_blocks_and_keeps_its_known_type_fields() -> None:
    cm = {
        P: "apps/Deployment:\n  ignoreDifferences: |\n    jsonPointers: [/spec/replicas]\n"
        "  knownTypeFields:\n  - {field: spec.template.spec, type: core/v1/PodSpec}\n",
        f"{P}.ignoreDifferences.apps_Deployment": "jsonPointers: [/spec/paused]\n",
    }
    rules = IgnoreRules(rules_from_argocd_cm(cm))
    [rule] = rules.matching("apps", "Deployment", "web", "default")
    assert rule.json_pointers == ("/spec/paused",)  # the block's /spec/replicas is drift again
    assert rule.origin == f"argocd-cm {P}.ignoreDifferences.apps_Deployment"
    assert rules.known_types("apps", "Deployment") == (("spec.template.spec", "core/v1/PodSpec"),)


def test_an_empty_split_value_clears_the_blocks_field() -> None:
    cm = {
        P: "apps/Deployment:\n  ignoreDifferences: |\n    jsonPointers: [/spec/replicas]\n",
        f"{P}.ignoreDifferences.apps_Deployment": "",
    }
    assert IgnoreRules(rules_from_argocd_cm(cm)).matching("apps", "Deployment", "web", "default") == []


def test_the_all_key_is_the_wildcard_override_of_the_block() -> None:
    cm = {
        P: "'*/*':\n  ignoreDifferences: |\n    jsonPointers: [/metadata/labels]\n",
        f"{P}.ignoreDifferences.all": "managedFieldsManagers: [kube-controller-manager]\n",
    }
    [rule] = IgnoreRules(rules_from_argocd_cm(cm)).matching("apps", "Deployment", "web", "default")
    assert (rule.group, rule.kind, rule.json_pointers) == ("*", "*", ())
    assert rule.managed_fields_managers == ("kube-controller-manager",)


def test_kind_alone_and_empty_group_are_two_overrides_both_for_the_core_group() -> None:
    cm = {
        P: "Service:\n  ignoreDifferences: |\n    jsonPointers: [/spec/clusterIP]\n",
        f"{P}.ignoreDifferences._Service": "jsonPointers: [/spec/ports]\n",
    }
    assert sorted(resource_overrides(cm)) == ["/Service", "Service"]
    found = IgnoreRules(rules_from_argocd_cm(cm)).matching("", "Service", "web", "default")
    assert sorted(r.json_pointers for r in found) == [("/spec/clusterIP",), ("/spec/ports",)]


def test_an_override_key_with_two_slashes_matches_nothing() -> None:
    # normalizers/util.go getGroupKindForOverrideKey: logged by Argo CD, the rule matches no kind
    cm = {P: "a/b/Deployment:\n  ignoreDifferences: |\n    jsonPointers: [/spec/replicas]\n"}
    assert "a/b/Deployment" in resource_overrides(cm)
    assert rules_from_argocd_cm(cm) == []


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (f"{P}.lua.apps_Deployment", "x", "type 'lua' not supported"),
        (f"{P}.useOpenLibs.apps_Deployment", "yes", "not a boolean"),
        (f"{P}.ignoreDifferences.apps_Deployment", "jsonPointers: [\n", "invalid YAML"),
    ],
)
def test_what_upstream_refuses_is_refused(key: str, value: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        resource_overrides({key: value})


def test_keys_too_short_to_split_are_not_overrides() -> None:
    assert resource_overrides({f"{P}.health": "x", f"{P}X": "y", "resource.exclusions": "- {}"}) == {}


def test_two_keys_for_one_field_are_refused_not_picked_at_random() -> None:
    cm = {f"{P}.health.apps_Deployment": "a", f"{P}X.health.apps_Deployment": "b"}
    with pytest.raises(InputError, match="random order"):
        resource_overrides(cm)


def test_the_services_loader_merges_and_names_its_setting(tmp_path: Path) -> None:
    mount = tmp_path / "cm"
    mount.mkdir()
    (mount / P).write_text("apps/Deployment:\n  ignoreDifferences: |\n    jsonPointers: [/spec/replicas]\n")
    (mount / f"{P}.ignoreDifferences.apps_Deployment").write_text("jsonPointers: [/spec/paused]\n")
    [rule] = system_rules_from_file(str(mount))
    assert rule.json_pointers == ("/spec/paused",)
    (mount / f"{P}.bogus.apps_Deployment").write_text("x")
    with pytest.raises(ConfigError, match="DRIFTGUARD_ARGOCD_CM_FILE"):
        system_rules_from_file(str(mount))


# --- the property: the loader against a model of settings.go --------------------------------------

ERROR = "error"
Z: dict[str, Any] = {
    "health": "",
    "useOpenLibs": False,
    "actions": "",
    "ignoreDifferences": ((), (), ()),
    "ignoreResourceUpdates": ((), (), ()),
    "knownTypeFields": (),
}


def _model_diff(text: Any) -> tuple[tuple[str, ...], ...]:
    raw = (yaml.safe_load(text) if isinstance(text, str) else text) or {}
    return tuple(
        tuple(raw.get(f) or ()) for f in ("jsonPointers", "jqPathExpressions", "managedFieldsManagers")
    )


def _model_known(raw: Any) -> tuple[tuple[str, str], ...]:
    items = (yaml.safe_load(raw) if isinstance(raw, str) else raw) or []
    return tuple((i["field"], i.get("type", "")) for i in items)


def model_key(group_kind: str) -> str | None:
    """convertToOverrideKey, then ``all``; None where upstream errors."""
    gk = group_kind.split("_")
    if len(gk) == 2:
        return f"{gk[0]}/{gk[1]}"
    if len(gk) == 1 and group_kind != "":
        return "*/*" if group_kind == "all" else group_kind
    return None


def model_overrides(data: dict[str, str], order: list[str]) -> dict[str, dict[str, Any]] | str:
    """settings.go's merge with the split keys walked in ``order`` (Go's map order is random)."""
    out: dict[str, dict[str, Any]] = {}
    if data.get(P):
        for gk, raw in (yaml.safe_load(data[P]) or {}).items():
            out[gk] = {
                "health": raw.get("health.lua", ""),
                "useOpenLibs": raw.get("health.lua.useOpenLibs", False),
                "actions": raw.get("actions", ""),
                "ignoreDifferences": _model_diff(raw.get("ignoreDifferences", "")),
                "ignoreResourceUpdates": _model_diff(raw.get("ignoreResourceUpdates", "")),
                "knownTypeFields": _model_known(raw.get("knownTypeFields")),
            }
    for k in order:
        v = data[k]
        if not k.startswith(P):
            continue
        parts = k.split(".", 3)
        if len(parts) < 4:
            continue
        key = model_key(parts[3])
        if key is None:
            return ERROR
        o = dict(out.get(key, Z))
        t = parts[2]
        if t in ("health", "actions"):
            o[t] = v
        elif t == "useOpenLibs":
            if v not in ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"):
                return ERROR
            o[t] = v in ("1", "t", "T", "TRUE", "true", "True")
        elif t in ("ignoreDifferences", "ignoreResourceUpdates"):
            o[t] = _model_diff(v)
        elif t == "knownTypeFields":
            o[t] = _model_known(v)
        else:
            return ERROR
        out[key] = o
    return out


def model_rules(overrides: dict[str, dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The ignore rules the normalizers build from the overrides (util/argo/normalizers), sorted."""
    found = []
    for key, o in overrides.items():
        gk = key.split("/")
        if len(gk) > 2 or not any(o["ignoreDifferences"]):
            continue
        group, kind = (gk[0], gk[1]) if len(gk) == 2 else ("", gk[0])
        found.append((group, kind, *o["ignoreDifferences"]))
    return sorted(found)


def project(o: ResourceOverride) -> dict[str, Any]:
    return {
        "health": o.health_lua,
        "useOpenLibs": o.use_open_libs,
        "actions": o.actions,
        "ignoreDifferences": diff_of(o),
        "ignoreResourceUpdates": o.ignore_resource_updates,
        "knownTypeFields": known_of(o),
    }


# the same four kinds written both ways (block key, split key), then rarer spellings and errors
BLOCK_KEYS = ["apps/Deployment", "/Service", "Service", "*/*", "cert-manager.io/Certificate"]
GROUP_KINDS = [
    "apps_Deployment",
    "_Service",
    "Service",
    "all",
    "Deployment",
    "cert-manager.io_Certificate",
    "",
    "a_b_c",
]
DIFFS = st.sampled_from(
    [
        "",
        "jsonPointers: [/spec/replicas]\n",
        "jqPathExpressions: ['.spec.x']\n",
        "managedFieldsManagers: [m1, m2]\n",
    ]
)
KNOWN = st.sampled_from(
    ["", "- {field: spec.x, type: core/v1/PodSpec}\n", "- {field: spec.y, type: core/Quantity}\n"]
)
VALUES = {
    "health": st.sampled_from(["", "hs = {}\n", "bar"]),
    "actions": st.sampled_from(["", "discovery.lua: x\n"]),
    "useOpenLibs": st.sampled_from(["true", "false", "1", "0", "T", "F", "TRUE", "False"])
    | st.sampled_from(["yes", ""]),
    "ignoreDifferences": DIFFS,
    "ignoreResourceUpdates": DIFFS,
    "knownTypeFields": KNOWN,
    "bogus": st.just("x"),
}
BLOCK_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "health.lua": st.sampled_from(["foo\n", "bar"]),
    "health.lua.useOpenLibs": st.booleans(),
    "actions": st.sampled_from(["foo\n"]),
    "ignoreDifferences": DIFFS,
    "ignoreResourceUpdates": DIFFS,
    "knownTypeFields": KNOWN.map(lambda t: yaml.safe_load(t) or []),
}


@st.composite
def argocd_cms(draw: st.DrawFn) -> dict[str, str]:
    data: dict[str, str] = {}
    block: dict[str, dict[str, Any]] = draw(
        st.dictionaries(
            st.sampled_from(BLOCK_KEYS),
            st.fixed_dictionaries(
                {"ignoreDifferences": DIFFS},
                optional={k: v for k, v in BLOCK_FIELDS.items() if k != "ignoreDifferences"},
            ),
            max_size=4,
        )
    )
    an_empty_block = draw(st.booleans())
    if block or an_empty_block:
        data[P] = yaml.safe_dump(block) if block else ""
    valid = [t for t in VALUES if t != "bogus"]
    # ignoreDifferences and knownTypeFields (the fields driftguard applies) twice as often
    kinds = st.sampled_from([*valid, "ignoreDifferences", "knownTypeFields"])
    if draw(st.integers(0, 9)) == 0:
        kinds = st.sampled_from(list(VALUES))
    group_kinds = st.sampled_from(GROUP_KINDS[:4])
    if draw(st.integers(0, 4)) == 0:
        group_kinds = st.sampled_from(GROUP_KINDS)
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(kinds)
        prefix = f"{P}X" if draw(st.integers(0, 19)) == 0 else P
        data[f"{prefix}.{kind}.{draw(group_kinds)}"] = draw(VALUES[kind])
    if draw(st.booleans()):
        data["resource.compareoptions"] = "ignoreResourceStatusField: none\n"
    return data


@settings(max_examples=200, deadline=None)
@given(argocd_cms())
def test_the_merge_is_the_upstream_models_in_every_order(data: dict[str, str]) -> None:
    split = sorted(k for k in data if k != P)
    outcomes = []
    for order in (split, split[::-1]):
        outcome = model_overrides(data, order)
        if outcome not in outcomes:
            outcomes.append(outcome)
    try:
        got = resource_overrides(data)
    except InputError:
        event("refused")
        # refused: upstream fails too in some order, or its result would depend on the order
        assert ERROR in outcomes or _two_keys_for_one_field(data)
        return
    assert not _two_keys_for_one_field(data)
    shared = set(_block_keys(data)) & {model_key(k.split(".", 3)[3]) for k in data if k.startswith(f"{P}.")}
    event("merged" + (": the block and a split key share a kind" if shared else ""))
    if _same_field_both_ways(data):
        event("merged: the block and a split key set one field")
    [expected] = outcomes  # no error and no collision: every order gives one result
    assert isinstance(expected, dict)
    assert {k: project(o) for k, o in got.items()} == expected
    rules = rules_from_argocd_cm(data)
    applied = sorted(
        (r.group, r.kind, r.json_pointers, r.jq_path_expressions, r.managed_fields_managers)
        for r in rules
        if r.purpose == "ignore"
    )
    assert applied == model_rules(expected)


def _same_field_both_ways(data: dict[str, str]) -> bool:
    block = yaml.safe_load(data.get(P) or "{}") or {}
    names = {
        "ignoreDifferences": "ignoreDifferences",
        "knownTypeFields": "knownTypeFields",
        "health": "health.lua",
    }
    for k in data:
        parts = k.split(".", 3)
        if (
            k.startswith(f"{P}.")
            and len(parts) == 4
            and parts[2] in names
            and names[parts[2]] in (block.get(model_key(parts[3])) or {})
        ):
            return True
    return False


def _block_keys(data: dict[str, str]) -> list[str]:
    return list(yaml.safe_load(data.get(P) or "{}") or {})


def _two_keys_for_one_field(data: dict[str, str]) -> bool:
    seen = set()
    for k in data:
        parts = k.split(".", 3)
        if not k.startswith(P) or len(parts) < 4:
            continue
        target = (model_key(parts[3]), parts[2])
        if target[0] is None:
            continue
        if target in seen:
            return True
        seen.add(target)
    return False

"""ignore.py: Argo CD's documented ignoreDifferences examples, matching, jq timeouts, bad rules."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftguard.argocd_cm import rules_from_argocd_cm
from driftguard.errors import InputError
from driftguard.ignore import IgnoreRule, IgnoreRules, rules_from_application
from standins.drill import inference_desired
from tests.helpers import examples


@pytest.fixture
def rules_factory() -> Iterator[Any]:
    made: list[IgnoreRules] = []

    def make(*entries: dict[str, Any], timeout: float = 1.0) -> IgnoreRules:
        rules = IgnoreRules([IgnoreRule.from_dict(e, origin="test") for e in entries], jq_timeout=timeout)
        made.append(rules)
        return rules

    yield make
    for r in made:
        r.close()


def normalize(
    rules: IgnoreRules, obj: dict[str, Any], group: str = "apps", kind: str = "Deployment"
) -> dict[str, Any]:
    name = obj.get("metadata", {}).get("name", "")
    ns = obj.get("metadata", {}).get("namespace", "")
    return rules.normalize(obj, rules.matching(group, kind, name, ns))


def test_json_pointer_spec_replicas(rules_factory: Any) -> None:
    rules = rules_factory({"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]})
    out = normalize(rules, inference_desired())
    assert "replicas" not in out["spec"]
    assert inference_desired()["spec"]["replicas"] == 3  # input untouched


def test_escaped_annotation_pointer(rules_factory: Any) -> None:
    obj = inference_desired()
    obj["metadata"]["annotations"] = {"gpu.infra/slice-status": "ok"}
    rules = rules_factory(
        {
            "group": "apps",
            "kind": "Deployment",
            "jsonPointers": ["/metadata/annotations/gpu.infra~1slice-status"],
        }
    )
    out = normalize(rules, obj)
    assert "annotations" not in out["metadata"]  # the emptied map is dropped, as Argo CD does


def test_jq_select_injected_init_container(rules_factory: Any) -> None:
    obj = inference_desired()
    obj["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "injected-init-container"},
        {"name": "mine"},
    ]
    rules = rules_factory(
        {
            "group": "apps",
            "kind": "Deployment",
            "jqPathExpressions": [
                '.spec.template.spec.initContainers[] | select(.name == "injected-init-container")'
            ],
        }
    )
    out = normalize(rules, obj)
    assert out["spec"]["template"]["spec"]["initContainers"] == [{"name": "mine"}]


def test_missing_pointer_is_skipped(rules_factory: Any) -> None:
    rules = rules_factory(
        {"group": "*", "kind": "*", "jsonPointers": ["/spec/nothing/here", "/spec/replicas"]}
    )
    assert "replicas" not in normalize(rules, inference_desired())["spec"]


def test_matching_is_glob_on_group_kind_and_exact_on_name_namespace() -> None:
    rule = IgnoreRule(group="*.k8s.io", kind="*Webhook*", name="", namespace="")
    assert rule.matches("admissionregistration.k8s.io", "MutatingWebhookConfiguration", "x", "")
    assert not rule.matches("apps", "MutatingWebhookConfiguration", "x", "")
    named = IgnoreRule(group="apps", kind="Deployment", name="guestbook", namespace="default")
    assert named.matches("apps", "Deployment", "guestbook", "default")
    assert not named.matches("apps", "Deployment", "guestbook", "other")
    assert not named.matches("apps", "Deployment", "guestbook-2", "default")
    assert not IgnoreRule(group="", kind="Service").matches("apps", "Service", "a", "")


def test_runaway_jq_is_killed_and_skipped(rules_factory: Any) -> None:
    rules = rules_factory(
        {"group": "*", "kind": "*", "jqPathExpressions": [".spec | until(false; .)"]}, timeout=0.5
    )
    obj = inference_desired()
    assert normalize(rules, obj) == obj
    # the runner recovers for the next expression
    rules2 = rules_factory({"group": "*", "kind": "*", "jqPathExpressions": [".spec.replicas"]})
    rules2._runner = rules._runner
    assert "replicas" not in normalize(rules2, obj)["spec"]


def test_bad_rules_are_refused_clearly() -> None:
    with pytest.raises(InputError, match="does not compile"):
        IgnoreRules([IgnoreRule.from_dict({"jqPathExpressions": [".spec[[["]}, origin="app x")])
    with pytest.raises(InputError, match="must start with '/'"):
        IgnoreRule.from_dict({"jsonPointers": ["spec/replicas"]}, origin="app x")
    with pytest.raises(InputError, match="list of strings"):
        IgnoreRule.from_dict({"jsonPointers": "/spec/replicas"}, origin="app x")
    with pytest.raises(InputError, match="must be a mapping"):
        IgnoreRule.from_dict(["x"], origin="app x")  # type: ignore[arg-type]


def test_rules_from_application_and_argocd_cm() -> None:
    app = {
        "metadata": {"name": "inference"},
        "spec": {
            "ignoreDifferences": [{"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]}]
        },
    }
    [rule] = rules_from_application(app)
    assert rule.json_pointers == ("/spec/replicas",) and "inference" in rule.origin
    cm = {
        "data": {
            "resource.customizations.ignoreDifferences.admissionregistration.k8s.io_MutatingWebhookConfiguration": "jqPathExpressions:\n- '.webhooks[]?.clientConfig.caBundle'\n",
            "resource.customizations.ignoreDifferences.apps_Deployment": "managedFieldsManagers:\n- kube-controller-manager\n",
            "resource.customizations.ignoreDifferences.all": "jsonPointers:\n- /spec/replicas\n",
            "resource.customizations": "apps/StatefulSet:\n  ignoreDifferences: |\n    jsonPointers:\n    - /spec/volumeClaimTemplates\n",
            "url": "https://argocd.example.com",
        }
    }
    rules = {(r.group, r.kind): r for r in rules_from_argocd_cm(cm)}
    assert rules[("admissionregistration.k8s.io", "MutatingWebhookConfiguration")].jq_path_expressions
    assert rules[("apps", "Deployment")].managed_fields_managers == ("kube-controller-manager",)
    assert rules[("*", "*")].json_pointers == ("/spec/replicas",)
    assert rules[("apps", "StatefulSet")].json_pointers == ("/spec/volumeClaimTemplates",)
    with pytest.raises(InputError, match="invalid YAML"):
        rules_from_argocd_cm({"resource.customizations.ignoreDifferences.all": "jsonPointers: [\n"})


@settings(max_examples=examples(150), deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.integers() | st.dictionaries(st.sampled_from(["x", "y"]), st.integers(), max_size=2),
        max_size=3,
    )
)
def test_pointer_rules_remove_exactly_their_paths(obj: dict[str, Any]) -> None:
    rules = IgnoreRules([IgnoreRule(group="*", kind="*", json_pointers=("/a", "/b/x"))])
    out = rules.normalize(copy.deepcopy(obj), rules.rules)
    assert "a" not in out
    b = out.get("b")
    assert not (isinstance(b, dict) and "x" in b)
    if isinstance(obj.get("b"), int):
        assert b == obj["b"]  # a pointer through a scalar is skipped
    assert out.get("c") == (obj.get("c") if obj.get("c") != {} else None)

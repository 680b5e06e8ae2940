"""AnalysisTemplates and the Rollout example against Argo Rollouts v1.9.1's CRDs, and their URLs against our routes."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import jsonschema
import pytest
import yaml

from analysis_provider.app import ALL_ARGS
from analysis_provider.gates import GATES
from analysis_provider.gates.base import parse_args

from .reference import ROOT, kustomize, validate

TEMPLATES = [
    d
    for d in yaml.safe_load_all(
        (ROOT / "manifests/examples/rollouts/cluster-analysis-templates.yaml").read_text()
    )
    if d
]
ROLLOUT = yaml.safe_load((ROOT / "manifests/examples/rollouts/rollout.yaml").read_text())
SAMPLE = {
    "app": "payment-production",
    "app-namespace": "argocd",
    "service": "payment",
    "threshold": "0.99",
    "window": "5m",
    "api-token": "t",
}


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t["metadata"]["name"])
def test_templates_fit_the_crd_and_our_routes(template: dict) -> None:  # type: ignore[type-arg]
    validate(template, "argo-rollouts/cluster-analysis-template-crd.yaml", "v1alpha1")
    declared = {a["name"] for a in template["spec"]["args"]}
    for metric in template["spec"]["metrics"]:
        web = metric["provider"]["web"]
        used = set(re.findall(r"\{\{args\.([\w-]+)\}\}", web["url"] + str(web["headers"])))
        assert used <= declared, used - declared
        url = re.sub(r"\{\{args\.([\w-]+)\}\}", lambda m: SAMPLE[m.group(1)], web["url"])
        parts = urlsplit(url)
        m = re.fullmatch(r"/v1/gates/([\w-]+)", parts.path)
        assert m, parts.path
        gate = m.group(1)
        spec = ALL_ARGS if gate == "all" else GATES[gate].args
        parse_args(spec, dict(parse_qsl(parts.query)))  # raises on unknown or malformed arguments
        assert web["jsonPath"] in ("{$.ok}", "{$.verdict}")
        assert web["timeoutSeconds"] < 10
        assert {"key": "Authorization", "value": "Bearer {{args.api-token}}"} in web["headers"]


def test_schema_check_bites() -> None:
    broken = yaml.safe_load(yaml.safe_dump(TEMPLATES[0]))
    broken["spec"]["metrics"][0]["provider"]["web"]["headers"] = [{"key": "Authorization"}]
    with pytest.raises(jsonschema.ValidationError):
        validate(broken, "argo-rollouts/cluster-analysis-template-crd.yaml", "v1alpha1")


def test_rollout_fits_the_crd_and_uses_existing_templates() -> None:
    validate(ROLLOUT, "argo-rollouts/rollout-crd.yaml", "v1alpha1")
    names = {
        t["metadata"]["name"]: {
            a["name"] for a in t["spec"]["args"] if "value" not in a and "valueFrom" not in a
        }
        for t in TEMPLATES
    }
    for step in ROLLOUT["spec"]["strategy"]["canary"]["steps"]:
        if "analysis" in step:
            given = {a["name"] for a in step["analysis"].get("args", [])}
            for ref in step["analysis"]["templates"]:
                assert ref["clusterScope"] is True and ref["templateName"] in names
                assert names[ref["templateName"]] <= given, ref["templateName"]


def test_analysis_deployment() -> None:
    docs = kustomize(ROOT / "manifests/base")
    deploy = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "driftguard-analysis"
    )
    pod = deploy["spec"]["template"]["spec"]
    [c] = pod["containers"]
    assert pod["securityContext"]["runAsUser"] == 999 and c["command"][0] == "driftguard-analysis"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert float(env["DRIFTGUARD_ANALYSIS_TIMEOUT"]) < 10
    # our deadline (plus a second for the network) under every template's: Rollouts must hear our reason
    shortest = min(m["provider"]["web"]["timeoutSeconds"] for t in TEMPLATES for m in t["spec"]["metrics"])
    assert float(env["DRIFTGUARD_ANALYSIS_TIMEOUT"]) + 1 <= shortest
    assert any(d["kind"] == "Service" and d["metadata"]["name"] == "driftguard-analysis" for d in docs)
    assert Path(ROOT / "manifests/base/analysis/secret.template.yaml").is_file()

"""The services' install paths against issue 31's attacks: secrets split by use, listeners fenced.

Rendered with the real kustomize and helm (tests/manifests/reference.py, tests/charts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from analysis_provider.callers import parse_callers

from .reference import ROOT

ROLLOUTS = ROOT / "manifests/examples/rollouts"


def _secret_refs(obj: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(obj, dict):
        if isinstance(obj.get("secretKeyRef"), dict):
            found.append(obj["secretKeyRef"])
        for v in obj.values():
            found.extend(_secret_refs(v))
    elif isinstance(obj, list):
        for v in obj:
            found.extend(_secret_refs(v))
    return found


def test_rollout_namespaces_hold_only_their_own_gate_token() -> None:
    """Before: every template read DRIFTGUARD_ANALYSIS_TOKEN from a Secret that also held the Argo CD token."""
    templates = [
        d for d in yaml.safe_load_all((ROLLOUTS / "cluster-analysis-templates.yaml").read_text()) if d
    ]
    refs = [r for t in templates for r in _secret_refs(t)]
    assert refs and all(r == {"name": "driftguard-gate", "key": "token"} for r in refs), refs
    [gate] = [d for d in yaml.safe_load_all((ROLLOUTS / "gate-token.template.yaml").read_text()) if d]
    assert set(gate["stringData"]) == {"token"}
    provider = yaml.safe_load((ROOT / "manifests/base/analysis/secret.template.yaml").read_text())
    assert provider["metadata"]["name"] != "driftguard-gate"
    assert "DRIFTGUARD_ARGOCD_TOKEN" in provider["stringData"]


def test_the_callers_template_is_a_valid_callers_file(tmp_path: Path) -> None:
    secret = yaml.safe_load((ROOT / "manifests/base/analysis/callers.template.yaml").read_text())
    data = secret["stringData"]
    for key, value in data.items():  # the Secret as mounted, placeholders filled
        (tmp_path / key).write_text(value if key == "callers.yaml" else f"{key}-0123456789abcdef")
    callers = parse_callers(yaml.safe_load(data["callers.yaml"]), base=tmp_path)
    by_name = {c.name: c for c in callers}
    assert by_name["payments"].allows(project="payments-eu", app="api")
    assert not by_name["payments"].allows(project="search", app="search-web")
    # the scrape token may read /metrics and ask about nothing
    assert not any(
        by_name["prometheus"].allows(project=p, app=a)
        for p in ("default", "payments", "*")
        for a in ("x", "*")
    )

"""The gate-identity component: the analysis provider asks the notifier, with only the read token mounted."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from analysis_provider.settings import ENV

from .reference import ROOT, kustomize


def test_the_component_points_the_gate_at_the_notifier_with_only_the_read_token(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "manifests", tmp_path / "manifests")
    overlay = tmp_path / "manifests" / "overlays" / "gate"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["../../base"],
                "components": ["../../components/gate-identity"],
            }
        )
    )
    docs = {(d["kind"], d["metadata"]["name"]): d for d in kustomize(overlay)}
    pod = docs[("Deployment", "driftguard-analysis")]["spec"]["template"]["spec"]
    [container] = [c for c in pod["containers"] if c["name"] == "analysis"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    ours = {n for n in env if n.startswith("DRIFTGUARD_ANALYSIS_NOTIFIER_")}
    assert len(ours) == 3 and ours <= set(ENV)  # every variable is one the analysis provider reads
    assert env["DRIFTGUARD_ARGOCD_URL"]  # the base's env is kept, the component's added
    service = docs[("Service", "driftguard-notifier")]
    port = service["spec"]["ports"][0]["port"]
    assert env["DRIFTGUARD_ANALYSIS_NOTIFIER_URL"] == f"http://{service['metadata']['name']}:{port}"
    assert "DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN" not in env  # a file, not an env value
    token_file = Path(env["DRIFTGUARD_ANALYSIS_NOTIFIER_READ_TOKEN_FILE"])
    [mount] = [m for m in container["volumeMounts"] if Path(m["mountPath"]) == token_file.parent]
    assert mount["readOnly"] is True
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    # only the read token of the notifier's Secret: never its webhook or Argo CD token
    assert volume["secret"]["secretName"] == "driftguard-notifier"
    assert volume["secret"]["items"] == [{"key": "DRIFTGUARD_NOTIFIER_READ_TOKEN", "path": token_file.name}]
    assert float(env["DRIFTGUARD_ANALYSIS_NOTIFIER_TIMEOUT"]) < float(env["DRIFTGUARD_ANALYSIS_TIMEOUT"])

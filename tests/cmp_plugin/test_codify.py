"""`driftguard-cmp codify` on the drill's chart (examples/gitops): the live change becomes a values edit.

Black-box: the real command, real helm, a git checkout of examples/gitops; each proof is checked
again here by rendering the edited checkout with `render -o` and comparing the field diff.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from driftguard.diff import diff_objects
from standins.drill import inference_desired
from tests.helpers import run_cmp

from .conftest import ROOT

DEPLOY = "Deployment/ai-serving/deepseek-inference"
PATH_FORM = [
    "charts/inference",
    "--values-file",
    "../../clusters/production/inference-values.yaml",
    "--app-name",
    "deepseek-inference",
    "--namespace",
    "ai-serving",
]
VALUES = "clusters/production/inference-values.yaml"


@pytest.fixture
def gitops(tmp_path: Path) -> Path:
    dest = tmp_path / "gitops"
    shutil.copytree(ROOT / "examples/gitops", dest)
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    return dest


def codify(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DRIFTGUARD_CMP_CACHE_DIR": str(cwd.parent / "cache")}
    return run_cmp(cwd, env, "codify", *args)


def rendered(cwd: Path) -> dict[tuple[str, str], dict[str, object]]:
    out = cwd.parent / "out.yaml"
    proc = run_cmp(cwd, None, "render", *PATH_FORM, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.read_text()) if d}


def test_the_drill_chart_renders_the_drills_deployment(gitops: Path) -> None:
    assert rendered(gitops)[("Deployment", "deepseek-inference")] == inference_desired()


def test_the_gpu_hotfix_becomes_a_values_edit_proven_by_render(gitops: Path) -> None:
    spec = f'{DEPLOY}:/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu="4"'
    before = rendered(gitops)
    values_before = (gitops / VALUES).read_text()
    proc = codify(gitops, *PATH_FORM, "--change", spec)
    assert proc.returncode == 0, proc.stderr
    # the diff touches the one line, its quoting and comment kept; nothing written without --write
    assert '-    nvidia.com/gpu: "2" # one node\'s worth; raise with care' in proc.stdout
    assert '+    nvidia.com/gpu: "4" # one node\'s worth; raise with care' in proc.stdout
    added = [ln for ln in proc.stdout.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert len(added) == 1 and (gitops / VALUES).read_text() == values_before
    assert 'nvidia.com~1gpu: "2" -> "4"' in proc.stderr
    proc = codify(gitops, *PATH_FORM, "--change", spec, "--write")
    assert proc.returncode == 0, proc.stderr
    after = rendered(gitops)
    changes = [(k, c.path, c.new) for k in before for c in diff_objects(before[k], after[k])]
    assert changes == [
        (
            ("Deployment", "deepseek-inference"),
            "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu",
            "4",
        )
    ]
    new_lines = set((gitops / VALUES).read_text().splitlines()) - set(values_before.splitlines())
    assert new_lines == {'    nvidia.com/gpu: "4" # one node\'s worth; raise with care'}


@pytest.mark.parametrize(
    ("pointer", "value", "line"),
    [
        ("/spec/replicas", "5", "replicas: 5"),
        (
            "/spec/template/spec/containers/0/image",
            "registry.example.com/ai/deepseek-inference:1.9.0",
            '  tag: "1.9.0"',
        ),
        ("/spec/template/spec/containers/0/env/0/value", "deepseek-v3", "    value: deepseek-v3"),
        ("/spec/template/metadata/annotations/example.com~1oncall", "alice", "  example.com/oncall: alice"),
        ("/metadata/annotations/example.com~1ticket", '"4711"', '  example.com/ticket: "4711"'),
    ],
    ids=["replicas", "image-tag", "env-value", "pod-annotation", "annotation"],
)
def test_each_field_of_the_drill_is_codified(gitops: Path, pointer: str, value: str, line: str) -> None:
    before = rendered(gitops)
    proc = codify(gitops, *PATH_FORM, "--change", f"{DEPLOY}:{pointer}={value}", "--write")
    assert proc.returncode == 0, proc.stderr
    assert line in (gitops / VALUES).read_text().splitlines()
    after = rendered(gitops)
    changed = [c.path for k in before for c in diff_objects(before[k], after[k])]
    assert len(changed) == 1 and pointer.startswith(changed[0])


def test_two_changes_at_once(gitops: Path) -> None:
    proc = codify(
        gitops,
        *PATH_FORM,
        "--change",
        f"{DEPLOY}:/spec/replicas=4",
        "--change",
        f'{DEPLOY}:/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu="4"',
    )
    assert proc.returncode == 0, proc.stderr
    assert "+replicas: 4" in proc.stdout and '+    nvidia.com/gpu: "4"' in proc.stdout


def test_a_literal_in_the_template_is_refused_saying_where(gitops: Path) -> None:
    proc = codify(
        gitops,
        *PATH_FORM,
        "--change",
        "HorizontalPodAutoscaler/ai-serving/deepseek-inference:/spec/scaleTargetRef/kind=StatefulSet",
    )
    assert proc.returncode == 1
    assert "literal in the chart template (templates/hpa.yaml:9)" in proc.stderr


def test_chart_defaults_need_allow_chart(gitops: Path) -> None:
    spec = "HorizontalPodAutoscaler/ai-serving/deepseek-inference:/spec/maxReplicas=12"
    chart_values = (gitops / "charts/inference/values.yaml").read_text()
    # with the environment's values file, the key is added there (the chart's defaults stay)
    proc = codify(gitops, *PATH_FORM, "--change", spec)
    assert proc.returncode == 0 and "+autoscaling:" in proc.stdout and "clusters/production" in proc.stdout
    # without one, only --allow-chart edits the shared defaults
    bare = ["charts/inference", "--app-name", "deepseek-inference", "--namespace", "ai-serving"]
    proc = codify(gitops, *bare, "--change", spec)
    assert proc.returncode == 1 and "--allow-chart" in proc.stderr
    proc = codify(gitops, *bare, "--change", spec, "--allow-chart", "--write")
    assert proc.returncode == 0, proc.stderr
    assert (gitops / "charts/inference/values.yaml").read_text() == chart_values.replace(
        "maxReplicas: 8", "maxReplicas: 12"
    )


@pytest.mark.parametrize(
    "spec",
    [
        "Deployment/ai-serving/deepseek-inference/spec/replicas=5",  # no ':' before the pointer
        "Deployment/deepseek-inference:/spec/replicas=5",  # no namespace slot
        "Deployment/ai-serving/deepseek-inference:/spec/replicas",  # no value
        "Deployment/ai-serving/deepseek-inference:/spec/re~2plicas=5",  # bad escape
        "Deployment/ai-serving/deepseek-inference:/spec/replicas=[1",  # not YAML
        "Deployment/ai-serving/nope:/spec/replicas=5",  # not rendered
        'Secret/ai-serving/db:/data/password="***(sha256:abcd)"',  # a masked value
    ],
)
def test_bad_input_exits_2(gitops: Path, spec: str) -> None:
    proc = codify(gitops, *PATH_FORM, "--change", spec)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("driftguard: error:")


# --- kustomize overlays and plain manifests ------------------------------------------------------

BASE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: deepseek-inference
spec:
  replicas: 3
  selector:
    matchLabels: {app: deepseek-inference}
  template:
    metadata:
      labels: {app: deepseek-inference}
    spec:
      containers:
        - name: server
          image: registry.example.com/ai/deepseek-inference:1.8.2
          resources:
            limits:
              nvidia.com/gpu: "2"
"""


@pytest.fixture
def overlay(tmp_path: Path) -> Path:
    root = tmp_path / "gitops"
    (root / "base").mkdir(parents=True)
    (root / "base/deployment.yaml").write_text(BASE)
    (root / "base/kustomization.yaml").write_text("resources:\n  - deployment.yaml\n")
    (root / "overlays/production").mkdir(parents=True)
    (root / "overlays/production/kustomization.yaml").write_text(
        "# production\nnamespace: ai-serving\nresources:\n  - ../../base\n"
        "images:\n  - name: registry.example.com/ai/deepseek-inference # the model server\n    newTag: 1.8.2\n"
    )
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_an_image_in_an_overlay_is_its_images_entry(overlay: Path) -> None:
    kust = overlay / "overlays/production/kustomization.yaml"
    before = kust.read_text()
    proc = codify(
        overlay,
        "overlays/production",
        "--change",
        f"{DEPLOY}:/spec/template/spec/containers/0/image=registry.example.com/ai/deepseek-inference:1.9.0",
        "--write",
    )
    assert proc.returncode == 0, proc.stderr
    assert kust.read_text() == before.replace("newTag: 1.8.2", "newTag: 1.9.0")


def test_a_field_in_an_overlay_is_a_json6902_patch(overlay: Path) -> None:
    gpu = f'{DEPLOY}:/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu="4"'
    ann = f"{DEPLOY}:/metadata/annotations/example.com~1oncall=alice"
    proc = codify(overlay, "overlays/production", "--change", gpu, "--change", ann, "--write")
    assert proc.returncode == 0, proc.stderr
    patch = yaml.safe_load(
        (overlay / "overlays/production/codify-deployment-deepseek-inference.yaml").read_text()
    )
    assert patch == [
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu",
            "value": "4",
        },
        {"op": "add", "path": "/metadata/annotations", "value": {"example.com/oncall": "alice"}},
    ]
    kust = yaml.safe_load((overlay / "overlays/production/kustomization.yaml").read_text())
    assert kust["patches"] == [
        {
            "path": "codify-deployment-deepseek-inference.yaml",
            "target": {"group": "apps", "kind": "Deployment", "name": "deepseek-inference"},
        }
    ]
    assert (overlay / "base/deployment.yaml").read_text() == BASE  # the shared base is never edited


def test_plain_manifests_change_the_line_itself(overlay: Path) -> None:
    plain = overlay / "inference"
    plain.mkdir()
    (plain / "deployment.yaml").write_text(
        BASE.replace("  name: deepseek-inference\n", "  name: deepseek-inference\n  namespace: ai-serving\n")
    )
    before = (plain / "deployment.yaml").read_text()
    proc = codify(
        overlay,
        "inference",
        "--change",
        f'{DEPLOY}:/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu="4"',
        "--change",
        f"{DEPLOY}:/spec/replicas=5",
        "--write",
    )
    assert proc.returncode == 0, proc.stderr
    assert (plain / "deployment.yaml").read_text() == before.replace('gpu: "2"', 'gpu: "4"').replace(
        "replicas: 3", "replicas: 5"
    )


# --- MANIFEST form and --from-alert --------------------------------------------------------------

APPSET = """\
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: payment
  namespace: argocd
spec:
  generators:
    - list:
        elements:
          - env: staging
          - env: production
  template:
    metadata:
      name: 'payment-{{env}}'
    spec:
      project: default
      source:
        repoURL: https://git.example.com/platform/gitops.git
        targetRevision: main
        path: charts/payment
        plugin:
          name: driftguard
          parameters:
            - name: values-files
              array: ['../../clusters/{{env}}/payment-values.yaml']
      destination:
        server: https://kubernetes.default.svc
        namespace: 'payment-{{env}}'
"""


def test_manifest_form_resolves_the_application(gitops: Path) -> None:
    proc = codify(gitops, "apps/inference.yaml", "--change", f"{DEPLOY}:/spec/replicas=4")
    assert proc.returncode == 0, proc.stderr
    assert "+++ b/clusters/production/inference-values.yaml" in proc.stdout and "+replicas: 4" in proc.stdout
    proc = codify(gitops, "apps/inference.yaml", "--app", "nope", "--change", f"{DEPLOY}:/spec/replicas=4")
    assert proc.returncode == 2 and "defines deepseek-inference" in proc.stderr


def test_manifest_form_picks_a_generated_application(gitops: Path) -> None:
    (gitops / "apps/payment-set.yaml").write_text(APPSET)
    spec = "Deployment/payment-production/payment-production:/spec/replicas=9"
    proc = codify(gitops, "apps/payment-set.yaml", "--change", spec)
    assert proc.returncode == 2 and "--app" in proc.stderr  # two Applications: which one?
    proc = codify(gitops, "apps/payment-set.yaml", "--app", "payment-production", "--change", spec, "--write")
    assert proc.returncode == 0, proc.stderr
    assert "replicas: 9" in (gitops / "clusters/production/payment-values.yaml").read_text()
    assert "replicas: 2" in (gitops / "clusters/staging/payment-values.yaml").read_text()


def test_from_alert_reads_the_notifiers_json(gitops: Path) -> None:
    import json

    from driftguard.report import build_report
    from standins.argo_api import application
    from standins.drill import inference_live, managed_item

    app = application("deepseek-inference", resources=[], dest_namespace="ai-serving")
    report = build_report(app, [managed_item(inference_desired(), inference_live(gpu="4"))])
    alert = gitops.parent / "alert.json"
    alert.write_text(json.dumps(report.to_json()))
    proc = codify(gitops, "apps/inference.yaml", "--from-alert", str(alert))
    assert proc.returncode == 0, proc.stderr
    assert '+    nvidia.com/gpu: "4"' in proc.stdout
    assert "+replicas" not in proc.stdout  # the HPA's replicas are not a human change
    alert.write_text(json.dumps({"alerting": []}))
    proc = codify(gitops, "apps/inference.yaml", "--from-alert", str(alert))
    assert proc.returncode == 2 and "no human change" in proc.stderr


def test_two_values_for_one_field_is_bad_input(gitops: Path) -> None:
    proc = codify(
        gitops, *PATH_FORM, "--change", f"{DEPLOY}:/spec/replicas=4", "--change", f"{DEPLOY}:/spec/replicas=5"
    )
    assert proc.returncode == 2 and "two different values" in proc.stderr


def test_values_files_outside_the_checkout_are_refused(gitops: Path) -> None:
    proc = codify(
        gitops,
        "charts/inference",
        "--values-file",
        "../../../../etc/passwd",
        "--change",
        f"{DEPLOY}:/spec/replicas=4",
    )
    assert proc.returncode == 2 and "outside the repository checkout" in proc.stderr

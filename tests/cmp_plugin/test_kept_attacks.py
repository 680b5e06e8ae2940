"""Issue 27's kept-set attacks: one line of YAML that made the guards count a pruned resource as kept.

Each writes a protected resource the Application manages now (the baseline) in a form Argo CD does
not keep (cmp_plugin/target.py cites the upstream rule), in the default configuration. Before the
fix every one of them passed the shrink guard while Argo CD pruned the live object.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from standins.argo_api import FakeArgo, application, kubeconfig, serve

from .conftest import Generate
from .test_scan_layouts import ATTACKS, as_list, attacked

PLAIN = [
    ("", "Namespace", "", "plain"),
    ("", "ConfigMap", "plain", "flow"),
    ("", "Secret", "plain", "flow-secret"),
    ("", "ConfigMap", "plain", "from-json"),
]
PVC = """apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: plain{annotations}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 1Gi}}}}
{extra}"""


@pytest.fixture
def cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    with serve(FakeArgo()) as fake:
        cfg = tmp_path / "kubeconfig"
        cfg.write_text(kubeconfig(fake.url, fake.token))
        fake.kubeconfig = str(cfg)  # type: ignore[attr-defined]
        yield fake


def run(generate: Generate, fake: FakeArgo, **env: str):  # type: ignore[no-untyped-def]
    return generate("plain", ARGOCD_APP_NAME="plain", DRIFTGUARD_KUBECONFIG=fake.kubeconfig, **env)  # type: ignore[attr-defined]


def pvc(*, annotations: dict[str, str] | None = None, extra: str = "") -> str:
    notes = "".join(f"\n    {k}: {json.dumps(v)}" for k, v in (annotations or {}).items())
    return PVC.format(annotations="\n  annotations:" + notes if notes else "", extra=extra)


def test_the_same_pvc_kept_passes(generate: Generate, cluster: FakeArgo, repo: Path) -> None:
    """The control: a PVC the render keeps is no removal."""
    cluster.put(application("plain", resources=[*PLAIN, ("", "PersistentVolumeClaim", "plain", "data")]))
    (repo / "plain" / "pvc.yaml").write_text(pvc())
    proc = run(generate, cluster)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("what", "manifest"),
    [
        ("an items list", pvc(extra="items: []\n")),
        ("argocd PreSync hook", pvc(annotations={"argocd.argoproj.io/hook": "PreSync"})),
        ("argocd hook of an unknown type", pvc(annotations={"argocd.argoproj.io/hook": "Whenever"})),
        ("argocd hook, empty", pvc(annotations={"argocd.argoproj.io/hook": ""})),
        ("argocd PostDelete hook", pvc(annotations={"argocd.argoproj.io/hook": "PostDelete"})),
        ("helm pre-install hook", pvc(annotations={"helm.sh/hook": "pre-install"})),
        ("helm test hook (ignored)", pvc(annotations={"helm.sh/hook": "test"})),
        ("helm pre-delete hook", pvc(annotations={"helm.sh/hook": "crd-install,pre-delete"})),
        (
            "hook key spelled with escapes",
            pvc().replace(
                "  namespace: plain",
                '  namespace: plain\n  annotations: {"argocd.argoproj.io\\x2fhook": Sync}',
            ),
        ),
        ("generateName equal to the old name", pvc().replace("  name: data", "  generateName: data")),
        # go-yaml v2 decode.go: a !!binary scalar decodes to a string, a mapping key too
        (
            "hook key as !!binary",
            pvc().replace(
                "  namespace: plain",
                "  namespace: plain\n  annotations:\n    !!binary YXJnb2NkLmFyZ29wcm9qLmlvL2hvb2s=: PreSync",
            ),
        ),
        (
            "helm hook key as a verbatim binary tag",
            pvc().replace(
                "  namespace: plain",
                "  namespace: plain\n  annotations:\n    !<tag:yaml.org,2002:binary> aGVsbS5zaC9ob29r: pre-install",
            ),
        ),
        # go-yaml v2 yamlprivateh.go is_break: CR, NEL, LS and PS end a line as LF does
        ("items after a lone CR", pvc().rstrip("\n") + "\ritems: []\n"),
        ("items after a NEL", pvc().rstrip("\n") + "\x85items: []\n"),
        ("items after a line separator", pvc().rstrip("\n") + "\u2028items: []\n"),
        ("items after a paragraph separator", pvc().rstrip("\n") + "\u2029items: []\n"),
        # helm's layout (a template's output): a second namespace key Go reads last, spelled so
        # that a line scanner does not see it; or the name continued on a deeper line
        *(
            (
                f"namespace moved by {how!r}",
                "---\n" + pvc().replace("  namespace: plain\n", f"  namespace: plain\n{how}"),
            )
            for how in (
                "  <<: {namespace: other}\n",
                '  "namespace": other\n',
                "  namespace  : other\n",
                "  ? namespace\n  : other\n",
            )
        ),
        (
            "name continued on a deeper line",
            "---\n" + pvc().replace("  name: data\n", "  name: data\n   x\n"),
        ),
    ],
)
def test_a_pvc_argo_cd_does_not_keep_is_a_removal(
    generate: Generate, cluster: FakeArgo, repo: Path, what: str, manifest: str
) -> None:
    cluster.put(application("plain", resources=[*PLAIN, ("", "PersistentVolumeClaim", "plain", "data")]))
    (repo / "plain" / "pvc.yaml").write_text(manifest)
    proc = run(generate, cluster)
    assert proc.returncode == 3, (what, proc.stderr)
    assert "1 of a protected kind (PersistentVolumeClaim)" in proc.stderr.splitlines()[0], proc.stderr
    assert "  PersistentVolumeClaim plain/data" in proc.stderr.splitlines()


def test_skip_hook_and_crd_install_are_kept(generate: Generate, cluster: FakeArgo, repo: Path) -> None:
    """gitops-engine keeps ``hook: Skip`` alone and Helm's ``crd-install`` in the target: no removal."""
    cluster.put(application("plain", resources=[*PLAIN, ("", "PersistentVolumeClaim", "plain", "data")]))
    for notes in ({"argocd.argoproj.io/hook": "Skip, Skip"}, {"helm.sh/hook": "crd-install"}):
        (repo / "plain" / "pvc.yaml").write_text(pvc(annotations=notes))
        proc = run(generate, cluster)
        assert proc.returncode == 0, (notes, proc.stderr)


def test_a_namespace_with_a_null_items_is_a_removal(
    generate: Generate, cluster: FakeArgo, repo: Path
) -> None:
    cluster.put(application("plain", resources=PLAIN))
    ns = repo / "plain" / "namespace.yaml"
    ns.write_text(ns.read_text() + "items: null\n")
    proc = run(generate, cluster)
    assert proc.returncode == 3, proc.stderr
    assert "1 of a protected kind (Namespace)" in proc.stderr.splitlines()[0]


def test_a_statefulset_with_an_items_list_is_a_removal(
    generate: Generate, cluster: FakeArgo, repo: Path
) -> None:
    cluster.put(application("plain", resources=[*PLAIN, ("apps", "StatefulSet", "plain", "db")]))
    (repo / "plain" / "sts.yaml").write_text(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, namespace: plain}\nitems: []\n"
    )
    proc = run(generate, cluster)
    assert proc.returncode == 3, proc.stderr
    assert "1 of a protected kind (StatefulSet)" in proc.stderr.splitlines()[0]


def test_the_namespace_parameter_does_not_move_what_argo_cd_keys(
    generate: Generate, cluster: FakeArgo, repo: Path
) -> None:
    """A PVC without a namespace lands in the destination namespace (``apps``), whatever ``namespace`` says."""
    cluster.put(application("plain", resources=[*PLAIN, ("", "PersistentVolumeClaim", "old", "data")]))
    (repo / "plain" / "pvc.yaml").write_text(pvc().replace("  namespace: plain\n", ""))
    params = json.dumps([{"name": "namespace", "string": "old"}])
    proc = run(generate, cluster, ARGOCD_APP_PARAMETERS=params)
    assert proc.returncode == 3, proc.stderr
    assert "  PersistentVolumeClaim old/data" in proc.stderr.splitlines()
    # and where Argo CD does put it, it is kept
    cluster.put(application("plain", resources=[*PLAIN, ("", "PersistentVolumeClaim", "apps", "data")]))
    assert run(generate, cluster, ARGOCD_APP_PARAMETERS=params).returncode == 0


def test_a_render_of_hooks_only_is_empty(generate: Generate, repo: Path) -> None:
    for f in (repo / "plain").rglob("*"):
        if f.is_file():
            f.unlink()
    (repo / "plain" / "job.yaml").write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n"
        "    argocd.argoproj.io/hook: PreSync\nspec: {}\n"
    )
    proc = generate("plain")
    assert proc.returncode == 3, proc.stderr
    assert "none of which Argo CD keeps" in proc.stderr


# the same attacks in the other layouts the scanner reads without parsing (test_scan_layouts.py
# crosses them all against the full parse, in the fast lane too; these run them through generate
# and the guard)
_SLOW = pytest.mark.slow  # the fast lane runs three through generate; every one in `make test-all`
LAYOUT_ATTACKS = [
    ("json", "quoted key", "namespace", False, False),
    pytest.param("flow", "merge", "namespace", False, False, marks=_SLOW),
    pytest.param("indent 4", "complex key", "name", False, False, marks=_SLOW),
    pytest.param("kind first", "binary hook", "namespace", False, False, marks=_SLOW),
    pytest.param("kustomize", "str tag", "namespace", False, False, marks=_SLOW),
    pytest.param("comments first", "items after break", "namespace", False, False, marks=_SLOW),
    pytest.param("document end", "continued", "name", False, False, marks=_SLOW),
    pytest.param("helm", "spaced key", "namespace", True, False, marks=_SLOW),
    ("helm", "meta: 5", "namespace", False, True),
    ("kustomize", "top: 9", "name", True, True),
]


@pytest.mark.parametrize(("layout", "attack", "key", "listed", "crlf"), LAYOUT_ATTACKS)
def test_a_pvc_moved_in_any_layout_is_a_removal(
    generate: Generate,
    cluster: FakeArgo,
    repo: Path,
    layout: str,
    attack: str,
    key: str,
    listed: bool,
    crlf: bool,
) -> None:
    assert attack in ATTACKS
    cluster.put(application("plain", resources=[*PLAIN, ("", "PersistentVolumeClaim", "plain", "data")]))
    doc = attacked(layout, attack, key, "data", "\x85")
    text = "---\n" + (as_list([doc], 2) if listed else doc)
    (repo / "plain" / "pvc.yaml").write_bytes(text.replace("\n", "\r\n" if crlf else "\n").encode())
    proc = run(generate, cluster)
    assert proc.returncode == 3, (layout, attack, proc.stderr)
    assert "1 of a protected kind (PersistentVolumeClaim)" in proc.stderr.splitlines()[0], proc.stderr
    assert "  PersistentVolumeClaim plain/data" in proc.stderr.splitlines()
    # the control: the same layout without the attack keeps the PVC
    doc = attacked(layout, "none", key, "data", "\x85")
    text = "---\n" + (as_list([doc], 2) if listed else doc)
    (repo / "plain" / "pvc.yaml").write_bytes(text.replace("\n", "\r\n" if crlf else "\n").encode())
    proc = run(generate, cluster)
    assert proc.returncode == 0, (layout, proc.stderr)


# reposerver/repository/repository.go (v3.5.1, GenerateManifests): a List is flattened one level
# (EachListItem), never its items again: an item with ``items`` of its own is kept as it stands
NESTED_LIST = """apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: {kind}
  metadata:
    name: inner
    namespace: plain
  items:
  - apiVersion: v1
    kind: PersistentVolumeClaim
    metadata:
      name: data
      namespace: plain
"""


@pytest.mark.parametrize("kind", ["List", "ConfigMap"])
def test_a_pvc_in_the_items_of_a_list_item_is_a_removal(
    generate: Generate, cluster: FakeArgo, repo: Path, kind: str
) -> None:
    cluster.put(application("plain", resources=[*PLAIN, ("", "PersistentVolumeClaim", "plain", "data")]))
    (repo / "plain" / "pvc.yaml").write_text(NESTED_LIST.format(kind=kind))
    proc = run(generate, cluster)
    assert proc.returncode == 3, (kind, proc.stderr)
    assert "1 of a protected kind (PersistentVolumeClaim)" in proc.stderr.splitlines()[0], proc.stderr
    assert "  PersistentVolumeClaim plain/data" in proc.stderr.splitlines()


# go-yaml scannerc.go yaml_parser_scan_to_next_token: "Allow the BOM mark to start a line", at
# column 0 anywhere in the stream, so a key after a BOM on its own line is a plain key
@pytest.mark.parametrize(
    "manifest",
    [
        "---\n{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data, namespace: plain},\n"
        "\ufeffkind: ConfigMap}\n",
        '---\n{"apiVersion": "v1", "kind": "PersistentVolumeClaim",\n'
        '"metadata": {"name": "data", "namespace": "plain"},\n\ufeff"kind": "ConfigMap"}\n',
    ],
)
def test_a_kind_after_a_bom_at_a_line_start_is_a_removal(
    generate: Generate, cluster: FakeArgo, repo: Path, manifest: str
) -> None:
    cluster.put(application("plain", resources=[*PLAIN, ("", "PersistentVolumeClaim", "plain", "data")]))
    (repo / "plain" / "pvc.yaml").write_text(manifest)
    proc = run(generate, cluster)
    assert proc.returncode == 3, proc.stderr
    assert "  PersistentVolumeClaim plain/data" in proc.stderr.splitlines()


def test_a_namespace_key_with_a_spaced_colon_is_a_removal(
    generate: Generate, cluster: FakeArgo, repo: Path
) -> None:
    # go-yaml scannerc.go yaml_parser_scan_plain_scalar: in "namespace :plain" the ":" is no value
    # indicator (no blank after it): one key, and the PVC lands in the destination namespace
    cluster.put(application("plain", resources=[*PLAIN, ("", "PersistentVolumeClaim", "plain", "data")]))
    (repo / "plain" / "pvc.yaml").write_text(
        "---\n{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data, namespace :plain},\n"
        "  spec: {volumeName: v}}\n"
    )
    proc = run(generate, cluster)
    assert proc.returncode == 3, proc.stderr
    assert "  PersistentVolumeClaim plain/data" in proc.stderr.splitlines()

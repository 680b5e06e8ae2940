"""cmp_plugin.kept: which rendered objects Argo CD keeps, held to a model of upstream's code.

The reference model follows the Go functions one by one (gitops-engine, as vendored in argo-cd
v3.5.1: pkg/sync/reconcile.go splitHooks, pkg/sync/ignore/ignore.go Ignore, pkg/sync/hook/hook.go
IsHook/Skip/Types, pkg/sync/hook/helm/{hook,type}.go, pkg/sync/resource/annotations.go
GetAnnotationCSVs; argo-cd controller/hook.go and controller/state.go
partitionTargetObjsForSync).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cmp_plugin.kept import is_kept, kept_mask
from cmp_plugin.scan import scan_stream

ARGO, HELM = "argocd.argoproj.io/hook", "helm.sh/hook"


def csvs(ann: dict[str, str], key: str) -> list[str]:
    """GetAnnotationCSVs: a missing key reads as "", items trimmed, empty dropped, deduplicated."""
    seen: list[str] = []
    for item in ann.get(key, "").split(","):
        val = item.strip()
        if val and val not in seen:
            seen.append(val)
    return seen


def types(ann: dict[str, str]) -> list[str]:
    out = [t for t in csvs(ann, ARGO) if t in ("PreSync", "Sync", "PostSync", "SyncFail", "Skip")]
    if not out:
        helm = {
            "pre-install": "PreSync",
            "pre-upgrade": "PreSync",
            "post-upgrade": "PostSync",
            "post-install": "PostSync",
        }
        out = [helm[t] for t in csvs(ann, HELM) if t in helm]
    return out


def skip(ann: dict[str, str]) -> bool:
    for t in types(ann):
        if t == "Skip":
            return len(types(ann)) == 1
    return False


def is_hook(ann: dict[str, str]) -> bool:
    if ARGO in ann:
        return not skip(ann)
    return HELM in ann and ann[HELM] != "crd-install"


def ignore(ann: dict[str, str]) -> bool:
    return is_hook(ann) and len(types(ann)) == 0


def hook_of_type(ann: dict[str, str], argo: str, helm: str) -> bool:
    for key, want in ((ARGO, argo), (HELM, helm)):
        if key in ann and any(item.strip() == want for item in ann[key].split(",")):
            return True
    return False


def reference_kept(ann: dict[str, str]) -> bool:
    sync_phase = any(t in ("PreSync", "Sync", "PostSync", "SyncFail") for t in types(ann))
    for argo, helm in (("PreDelete", "pre-delete"), ("PostDelete", "post-delete")):
        if hook_of_type(ann, argo, helm) and not sync_phase:
            return False  # partitionTargetObjsForSync
    if ignore(ann):
        return False  # splitHooks: ignored
    return not is_hook(ann)  # splitHooks: hooks go to the hooks list


ARGO_WORDS = [
    "PreSync",
    "Sync",
    "PostSync",
    "SyncFail",
    "Skip",
    "PreDelete",
    "PostDelete",
    "Bogus",
    "",
    " Skip ",
]
HELM_WORDS = [
    "pre-install", "pre-upgrade", "post-install", "post-upgrade", "pre-delete", "post-delete", "test",
    "test-success", "crd-install", "pre-rollback", "", " post-install",
]  # fmt: skip


def annotation(words: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(words), max_size=3).map(",".join)


annotations = st.fixed_dictionaries(
    {},
    optional={ARGO: annotation(ARGO_WORDS), HELM: annotation(HELM_WORDS), "other": st.just("x")},
)


@given(annotations)
def test_kept_is_argo_cds_rule(ann: dict[str, str]) -> None:
    assert is_kept(ann) == reference_kept(ann), ann


def test_upstream_cases() -> None:
    # gitops-engine pkg/sync/hook/helm/hook_test.go: "crd-install" is no hook
    assert is_kept({HELM: "crd-install"})
    assert not is_kept({HELM: "pre-install"}) and not is_kept({HELM: "test"})  # a test hook: ignored
    # pkg/sync/hook/hook_test.go: Skip alone is no hook; Skip with another type is a hook
    assert is_kept({ARGO: "Skip"}) and not is_kept({ARGO: "Skip,PreSync"})
    assert not is_kept({ARGO: "Unknown"})  # a hook annotation naming no type: Ignore()
    assert not is_kept({ARGO: "PostDelete"}) and not is_kept({HELM: "post-delete"})
    assert is_kept({}) and is_kept(None)


def test_kept_mask_parses_only_documents_that_mention_a_hook() -> None:
    stream = (
        "---\n# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
        "---\n# Source: c/templates/t.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n"
        '  annotations:\n    "helm.sh/hook": test\n'
        "---\n# Source: c/templates/c.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
        "  annotations:\n    note: helm.sh/hook is only text here\n"
    )
    docs = scan_stream(stream)
    assert [d.name for d in docs] == ["a", "t", "c"]
    assert kept_mask(stream, docs) == [True, False, True]
    assert kept_mask(stream.replace("helm.sh/hook", "x"), docs) == [True, True, True]


def test_kept_mask_reads_a_hook_key_spelled_as_binary() -> None:
    """go-yaml decodes a ``!!binary`` key to a string (decode.go ``scalar``): a hook, not kept."""
    stream = (
        "---\n# Source: c/templates/p.yaml\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n"
        "  name: p\n  annotations:\n    !!binary YXJnb2NkLmFyZ29wcm9qLmlvL2hvb2s=: PreSync\n"
    )
    assert kept_mask(stream, scan_stream(stream)) == [False]

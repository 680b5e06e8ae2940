"""Generated ConfigMap/Secret renames, against a reference model of kustomize's hash (api/hasher/hasher.go).

The model: ``encodeConfigMap``/``encodeSecret`` marshal {kind, name, data[, binaryData|stringData][, type]}
as Go's json.Marshal does (sorted keys, no spaces), sha256 it, keep the first 10 hex digits and
write ``0 1 3 a e`` as ``g h k m t`` (``encode``); HashTransformer.go appends ``-`` and the hash.
``name`` is always "": ``getNodeValues`` looks ``metadata/name`` up as one field name
(``yaml.Lookup``), finds none and writes "" (the real kustomize agrees: the last test), so two
generators with the same data hash alike. Checked against the real kustomize of ``make setup``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cmp_plugin.prcheck.fieldchanges import generator_renames, hash_stem
from driftguard.manifests import ResourceKey

_ENCODE = str.maketrans({"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"})


def kustomize_hash(kind: str, name: str, data: dict[str, str], *, secret_type: str = "Opaque") -> str:
    doc: dict[str, Any] = {"kind": kind, "name": "", "data": data}
    if kind == "Secret":
        doc["type"] = secret_type
    marshalled = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(marshalled.encode()).hexdigest()[:10].translate(_ENCODE)


def generated(kind: str, name: str, data: dict[str, str], namespace: str = "shop") -> ResourceKey:
    return ResourceKey("", kind, namespace, f"{name}-{kustomize_hash(kind, name, data)}")


stems = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
datas = st.dictionaries(st.from_regex(r"[A-Za-z_]{1,8}", fullmatch=True), st.text(max_size=10), max_size=3)
kinds = st.sampled_from(["ConfigMap", "Secret"])


@given(kinds, stems, datas, datas)
def test_a_changed_generated_map_is_one_rename(
    kind: str, stem: str, old: dict[str, str], new: dict[str, str]
) -> None:
    before, after = generated(kind, stem, old), generated(kind, stem, new)
    assert hash_stem(before) == stem and hash_stem(after) == stem
    if before == after:
        return
    assert generator_renames([before], [after]) == [(before, after)]
    # another namespace, another kind or another stem is not the same map
    assert generator_renames([before], [after._replace(namespace="other")]) == []
    other = "Secret" if kind == "ConfigMap" else "ConfigMap"
    assert generator_renames([before], [after._replace(kind=other)]) == []
    assert generator_renames([before], [generated(kind, stem + "x", new)]) == []


@given(kinds, stems, datas, datas, datas)
def test_two_candidates_are_never_guessed(
    kind: str, stem: str, a: dict[str, str], b: dict[str, str], c: dict[str, str]
) -> None:
    one, two, three = (generated(kind, stem, d) for d in (a, b, c))
    if len({one, two, three}) < 3:
        return
    assert generator_renames([one, two], [three]) == []
    assert generator_renames([one], [two, three]) == []


@given(st.sampled_from(["Deployment", "Service"]), stems, datas)
def test_other_kinds_and_plain_names_are_not_generated(kind: str, stem: str, data: dict[str, str]) -> None:
    key = generated("ConfigMap", stem, data)
    assert hash_stem(key._replace(kind=kind)) is None
    assert hash_stem(ResourceKey("", "ConfigMap", "shop", stem)) is None or len(stem) > 11
    assert hash_stem(ResourceKey("", "ConfigMap", "shop", f"{stem}-v2")) is None
    assert hash_stem(ResourceKey("", "ConfigMap", "shop", f"{stem}-production")) is None


def test_a_helm_checksum_suffix_counts_too() -> None:
    """``{{ .Release.Name }}-config-{{ sha256sum ... | trunc 10 }}``: ten plain hex digits."""
    old = ResourceKey("", "ConfigMap", "shop", "web-config-0a1b2c3d4e")
    new = ResourceKey("", "ConfigMap", "shop", "web-config-9f8e7d6c5b")
    assert generator_renames([old], [new]) == [(old, new)]


def test_the_model_is_kustomize_s(tmp_path: Path) -> None:
    import os

    (tmp_path / "kustomization.yaml").write_text(
        "configMapGenerator:\n- name: app-config\n  literals: [LOG_LEVEL=debug, BANNER=hi]\n"
        "secretGenerator:\n- name: db\n  literals: [password=s3cret]\n"
    )
    out = subprocess.run(
        [os.environ["DRIFTGUARD_KUSTOMIZE"], "kustomize", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (
        f"name: app-config-{kustomize_hash('ConfigMap', 'app-config', {'LOG_LEVEL': 'debug', 'BANNER': 'hi'})}"
        in out
    )
    assert f"name: db-{kustomize_hash('Secret', 'db', {'password': 'czNjcmV0'})}" in out

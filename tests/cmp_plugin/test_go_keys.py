"""Issue 27: keys read as Go reads them (driftguard/gostruct.py) in what confine.py checks.

helm and kustomize decode Chart.yaml, requirements.yaml, kustomization.yaml and builtin plugin
configs with sigs.k8s.io/yaml into structs: encoding/json matches field names case-insensitively.
Each attack spells a path field another way; before, the check looked up the lower-case name
only and the tool read a chart or file outside the checkout.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from driftguard.errors import InputError
from driftguard.gostruct import GoStruct, fold, go_struct

from .conftest import Generate

OUTSIDE_CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stolen\n"


def outside_chart(repo: Path) -> Path:
    """A chart next to the checkout (another team's, or another render in flight)."""
    chart = repo.parent / "outside"
    (chart / "templates").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: common\nversion: 1.0.0\n")
    (chart / "templates" / "cm.yaml").write_text(OUTSIDE_CM)
    return chart


@pytest.mark.parametrize(
    ("file", "spelling"),
    [
        ("Chart.yaml", "    Repository: file://../../../outside\n"),
        ("Chart.yaml", "    REPOSITORY: file://../../../outside\n"),
        ("Chart.yaml", '    repository: "fil\\x65://../../../outside"\n'),
        ("Chart.yaml", "    repository: !!binary ZmlsZTovLy4uLy4uLy4uL291dHNpZGU=\n"),
        ("requirements.yaml", "    repository: file://../../../outside\n"),
    ],
)
def test_a_file_dependency_outside_is_refused_however_spelled(
    generate: Generate, repo: Path, file: str, spelling: str
) -> None:
    outside_chart(repo)
    web = repo / "charts/web"
    chart = (web / "Chart.yaml").read_text().replace("    repository: file://../common\n", "")
    if file == "requirements.yaml":
        chart = chart.replace("  - name: common\n    version: 1.0.0\n", "")
        (web / "requirements.yaml").write_text(
            f"dependencies:\n  - name: common\n    version: 1.0.0\n{spelling}"
        )
    else:
        chart = chart.replace(
            "  - name: common\n    version: 1.0.0\n", f"  - name: common\n    version: 1.0.0\n{spelling}"
        )
    (web / "Chart.yaml").write_text(chart)
    proc = generate("charts/web")
    assert proc.returncode != 0, proc.stdout
    assert "leads outside the repository checkout" in proc.stderr
    assert "stolen" not in proc.stdout
    assert not list((web / "charts").glob("common-*.tgz"))  # helm dependency build never copied it in


def test_a_kustomization_resources_spelled_otherwise_is_confined(generate: Generate, repo: Path) -> None:
    outside = repo.parent / "outside-k"
    outside.mkdir()
    (outside / "cm.yaml").write_text(OUTSIDE_CM)
    (outside / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    (repo / "overlays/base/kustomization.yaml").write_text("Resources:\n  - ../../../outside-k\n")
    proc = generate("overlays/base")  # the default load restrictor: kustomize itself lets a base outside
    assert proc.returncode != 0, proc.stdout
    assert "leads outside the repository checkout" in proc.stderr
    assert "stolen" not in proc.stdout


@pytest.mark.parametrize(
    "kustomization",
    [
        "configMapGenerator:\n- name: x\n  Files: [/etc/hostname]\n",
        "configMapGenerator:\n- name: x\n  ENVS: [/proc/self/environ]\n",
        "secretGenerator:\n- name: x\n  files: [/etc/hostname]\n",
        "generators: [gen.yaml]\n",
    ],
)
def test_files_spelled_otherwise_are_confined_with_the_restrictor_open(
    generate: Generate, repo: Path, kustomization: str
) -> None:
    base = repo / "overlays/base"
    (base / "kustomization.yaml").write_text(kustomization)
    (base / "gen.yaml").write_text(
        "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: g}\nFiles: [/etc/hostname]\n"
    )
    proc = generate("overlays/base", DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR="LoadRestrictionsNone")
    assert proc.returncode != 0, proc.stdout
    assert "leads outside the repository checkout" in proc.stderr


def test_two_keys_folding_to_one_field_are_refused(generate: Generate, repo: Path) -> None:
    (repo / "overlays/base/kustomization.yaml").write_text(
        "resources: [deployment.yaml]\nRESOURCES: [service.yaml]\n"
    )
    proc = generate("overlays/base")
    assert proc.returncode != 0
    assert "are one field" in proc.stderr and "'RESOURCES'" in proc.stderr


# -------------------------------------------------------------- Go's folding, as a property

FIELDS = ["resources", "repository", "files", "envs", "kind", "valuesFile", "patchesStrategicMerge"]
# unicode.SimpleFold orbits of the ASCII letters: the case pair, plus the Kelvin sign and long s
ORBIT = {c: {c, c.upper()} for c in "abcdefghijklmnopqrstuvwxyz"}
ORBIT["k"] |= {"\u212a"}
ORBIT["s"] |= {"\u017f"}


def go_equal_fold(a: str, b: str) -> bool:
    """bytes.EqualFold for an ASCII field name ``b``: rune by rune within one folding orbit."""
    return len(a) == len(b) and all(
        x == y or x in ORBIT.get(y.lower(), {y}) for x, y in zip(a, b, strict=True)
    )


@st.composite
def spelling(draw: st.DrawFn) -> tuple[str, str]:
    field = draw(st.sampled_from(FIELDS))
    chars = [
        draw(st.sampled_from(sorted(ORBIT.get(c.lower(), {c}) | {"\u0130", "\u00df", "_"}))) for c in field
    ]
    return field, "".join(chars)


@given(spelling())
def test_a_key_fills_the_field_go_would_fill(pair: tuple[str, str]) -> None:
    field, key = pair
    view = GoStruct({key: "x"}, "t.yaml")
    assert (view.get(field) == "x") == go_equal_fold(key, field)
    assert (fold(key) == fold(field)) == go_equal_fold(key, field)


@given(spelling(), spelling())
def test_two_spellings_of_one_field_are_refused(a: tuple[str, str], b: tuple[str, str]) -> None:
    if a[1] == b[1]:
        return
    data = {a[1]: 1, b[1]: 2}
    if fold(a[1]) == fold(b[1]):
        with pytest.raises(InputError):
            go_struct(data, "t.yaml")
    else:
        assert go_struct(data, "t.yaml") is not None


def _helm_lock_digest(req: list[dict[str, str]], lock: list[dict[str, str]]) -> str:
    """helm's resolver.HashReq: sha256 of Go's JSON of [Chart.yaml's dependencies, the lock's]
    (each dependency's fields in struct order; ``repository`` is never omitted)."""
    import hashlib
    import json

    return "sha256:" + hashlib.sha256(json.dumps([req, lock], separators=(",", ":")).encode()).hexdigest()


def test_a_chart_lock_naming_a_file_dependency_outside_is_refused(generate: Generate, repo: Path) -> None:
    """``helm dependency build`` downloads what Chart.lock lists (pkg/downloader/manager.go Build:
    ``downloadAll(lock.Dependencies)``) once its digest matches: a tenant writes the digest, and a
    lock naming ``file://`` outside copies that chart in while Chart.yaml looks harmless (seen with
    helm 4.2 unconfined; in the plugin Landlock stopped helm's read, the confinement check did not)."""
    outside_chart(repo)
    web = repo / "charts/web"
    (web / "Chart.yaml").write_text(
        (web / "Chart.yaml").read_text().replace("    repository: file://../common\n", '    repository: ""\n')
    )
    req = [
        {"name": "redis", "version": "7.0.0", "repository": "", "condition": "redis.enabled"},
        {"name": "common", "version": "1.0.0", "repository": ""},
    ]
    lock = [
        {"name": "redis", "version": "7.0.0", "repository": ""},
        {"name": "common", "version": "1.0.0", "repository": "file://../../../outside"},
    ]
    (web / "Chart.lock").write_text(
        "dependencies:\n"
        + "".join(
            f'- name: {d["name"]}\n  repository: "{d["repository"]}"\n  version: {d["version"]}\n'
            for d in lock
        )
        + f'digest: {_helm_lock_digest(req, lock)}\ngenerated: "2026-01-01T00:00:00Z"\n'
    )
    proc = generate("charts/web")
    assert "stolen" not in proc.stdout
    assert proc.returncode != 0, proc.stdout
    assert "leads outside the repository checkout" in proc.stderr, proc.stderr
    assert not list((web / "charts").glob("common-*.tgz"))

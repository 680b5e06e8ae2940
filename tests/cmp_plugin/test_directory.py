"""Directory apps read as Argo CD reads a directory source (cmp_plugin/dirsource.py).

The cases are upstream's own: argo-cd v3.5.1 reposerver/repository/repository_test.go
(``Test_findManifests``, ``Test_getPotentiallyValidManifests``, ``TestFindResources``,
``TestFindManifests_Exclude*``, ``TestRecurseManifestsInDir``, ``TestGenerateFromUTF16``,
``TestGenerateYamlManifestInDir``) over its testdata, copied unmodified into
tests/data/argo-cd/directory. Counts are of the objects ``findManifests`` returns (Lists not yet
flattened), as upstream asserts them. A property test holds the file selection to a reference
model written from ``getPotentiallyValidManifests``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmp_plugin import dirsource
from driftguard.errors import InputError, LimitExceeded
from tests.helpers import examples

from .conftest import Generate

DATA = Path(__file__).resolve().parents[1] / "data" / "argo-cd" / "directory"
BIG = 64 << 20


def find(
    name: str,
    *,
    root: str | None = None,
    recurse: bool = False,
    include: str = "",
    exclude: str = "",
    max_bytes: int = BIG,
    base: Path = DATA,
) -> tuple[list[dirsource.DirObject], list[str]]:
    files, warnings = dirsource.find_manifests(
        base / name,
        base / (root if root is not None else name),
        recurse=recurse,
        include=include,
        exclude=exclude,
        max_bytes=max_bytes,
    )
    return [o for f in files for o in f.objs], warnings


# --- Test_findManifests / Test_getPotentiallyValidManifests ----------------------------------------


@pytest.mark.parametrize(("recurse", "count"), [(False, 2), (True, 4)])
def test_recursion_only_when_asked(recurse: bool, count: int) -> None:
    objs, _ = find("recurse", recurse=recurse)
    assert len(objs) == count
    files, _ = dirsource.select_files(
        DATA / "recurse", DATA / "recurse", recurse=recurse, include="", exclude="", max_bytes=BIG
    )
    assert len(files) == count // 2


def test_non_manifest_files_are_not_read() -> None:
    assert find("non-manifest-file") == ([], [])


def test_a_circular_link_is_an_error(tmp_path: Path) -> None:
    app = tmp_path / "circular-link"
    app.mkdir()
    (app / "a.json").symlink_to("b.json")
    (app / "b.json").symlink_to("a.json")
    with pytest.raises(InputError, match=r"a\.json"):
        find("circular-link", base=tmp_path)


def test_an_out_of_bounds_symlink_is_an_error() -> None:
    with pytest.raises(InputError, match="illegal filepath in symlink"):
        find("out-of-bounds-link")


def test_a_symlink_to_a_regular_file_inside_works() -> None:
    objs, _ = find("in-bounds-link/app", root="in-bounds-link")
    assert len(objs) == 1


def test_a_symlink_to_nowhere_is_skipped_with_a_warning() -> None:
    objs, warnings = find("link-to-nowhere")
    assert objs == []
    assert warnings == [
        "driftguard: warning: skipping manifest file nowhere.json: destination of symlink 'nowhere.json' is missing"
    ]


def test_a_symlink_to_a_directory_is_skipped_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "test.dir").mkdir()
    (tmp_path / "test.json").symlink_to(tmp_path / "test.dir")
    files, warnings = dirsource.select_files(
        tmp_path, tmp_path, recurse=True, include="", exclude="", max_bytes=BIG
    )
    assert files == [] and "non-regular file" in warnings[0]


def test_the_size_limit_counts_the_linked_file() -> None:
    # The file is 35 bytes.
    with pytest.raises(LimitExceeded):
        find("in-bounds-link/app", root="in-bounds-link", max_bytes=34)
    assert len(find("in-bounds-link/app", root="in-bounds-link", max_bytes=35)[0]) == 1


def test_the_size_limit_is_the_sum_of_the_manifest_files() -> None:
    # ten files of 36 bytes (the .json) and 37 (the .yaml): 365 in all; README.md does not count
    assert len(find("several-files", max_bytes=365)[0]) == 10
    with pytest.raises(LimitExceeded):
        find("several-files", max_bytes=364)


def test_a_file_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_bytes(b"#" * 100)
    (tmp_path / "fifo.yaml").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "fifo.yaml")  # never opened: reading it would block the render
    with pytest.raises(LimitExceeded, match="larger than 99 bytes"):
        dirsource.select_files(tmp_path, tmp_path, recurse=False, include="", exclude="", max_bytes=99)
    files, warnings = dirsource.select_files(
        tmp_path, tmp_path, recurse=False, include="", exclude="", max_bytes=100
    )
    assert [f.name for f in files] == ["big.yaml"] and "not a regular file" in warnings[0]


def test_jsonnet_is_not_counted_against_the_limit_but_refused_by_name() -> None:
    files, _ = dirsource.select_files(
        DATA / "jsonnet-and-json",
        DATA / "jsonnet-and-json",
        recurse=False,
        include="",
        exclude="",
        max_bytes=36,
    )
    assert [f.name for f in files] == ["test.json", "test.jsonnet"]
    with pytest.raises(LimitExceeded):
        dirsource.select_files(
            DATA / "jsonnet-and-json",
            DATA / "jsonnet-and-json",
            recurse=False,
            include="",
            exclude="",
            max_bytes=35,
        )
    with pytest.raises(InputError, match=r"test\.jsonnet: jsonnet is not supported by driftguard"):
        find("jsonnet-and-json")
    objs, _ = find("jsonnet-and-json", exclude="*.jsonnet")
    assert [o.obj["kind"] for o in objs] == ["Pod"]


def test_a_partially_valid_yaml_file_is_an_error() -> None:
    with pytest.raises(InputError, match=r"partially-valid\.yaml:4: Object 'Kind' is missing"):
        find("partially-valid-yaml")


def test_an_invalid_manifest_is_an_error_and_the_skip_marker_skips_it() -> None:
    with pytest.raises(InputError, match=r"bad\.yaml"):
        find("invalid-manifests")
    assert find("invalid-manifests-skipped") == ([], [])


def test_irrelevant_yaml_is_skipped_with_a_warning_relevant_yaml_read() -> None:
    objs, warnings = find("irrelevant-yaml")
    assert len(objs) == 1 and objs[0].source == "relevant.yaml"
    assert len(warnings) == 1
    assert warnings[0].startswith("driftguard: warning: irrelevant.yaml: not a Kubernetes manifest")


def test_json_holds_one_object() -> None:
    with pytest.raises(InputError, match=r"Found multiple objects in 'list\.json'"):
        find("json-list")
    with pytest.raises(InputError, match=r"invalid\.json"):
        find("invalid-json")
    assert len(find("valid-json")[0]) == 1


def test_empty_documents_are_skipped() -> None:
    assert len(find("yaml-with-empty-document")[0]) == 1
    assert len(find("concatenated")[0]) == 3  # TestGenerateYamlManifestInDir


def test_utf16_with_a_byte_order_mark_is_read() -> None:
    objs, _ = find("utf-16")
    assert len(objs) == 2  # TestGenerateFromUTF16


# --- TestFindResources, TestFindManifests_Exclude*: include / exclude ------------------------------


@pytest.mark.parametrize(
    ("include", "exclude", "names"),
    [
        ("subdir/deploymentSub.yaml", "", ["nginx-deployment-sub"]),
        ("*.yaml", "", ["nginx-deployment", "nginx-deployment-sub"]),
        ("**/*.yaml", "", ["nginx-deployment-sub"]),
        ("nothing.yaml", "", []),
        ("", "subdir/deploymentSub.yaml", ["nginx-deployment"]),
        ("", "*.yaml", []),
        ("", "nothing.yaml", ["nginx-deployment", "nginx-deployment-sub"]),
    ],
)
def test_include_and_exclude_are_argo_cds_globs(include: str, exclude: str, names: list[str]) -> None:
    objs, _ = find("app-include-exclude", recurse=True, include=include, exclude=exclude)
    assert sorted(o.obj["metadata"]["name"] for o in objs) == sorted(names)


# --- through driftguard-cmp generate -----------------------------------------------------------------


def _plain_app(repo: Path) -> Path:
    app = repo / "dir-app"
    (app / "sub").mkdir(parents=True)
    (app / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: top\n")
    (app / "sub" / "b.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nested\n")
    (app / "values.yaml").write_text("replicas: 3\nimage: {tag: v1}\n")  # not a manifest
    (app / "c.json").write_text('{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "json"}}')
    return app


def test_generate_reads_the_top_level_by_default_and_warns_about_other_yaml(
    generate: Generate, repo: Path
) -> None:
    _plain_app(repo)
    proc = generate("dir-app")
    assert proc.returncode == 0, proc.stderr
    assert "name: top" in proc.stdout and '"name": "json"' in proc.stdout
    assert "nested" not in proc.stdout and "replicas" not in proc.stdout
    assert "driftguard: warning: values.yaml: not a Kubernetes manifest" in proc.stderr
    # the stream starts with a document marker: Argo CD never mistakes it for a JSON stream
    assert proc.stdout.startswith("---\n")


def test_generate_recurse_include_exclude(generate: Generate, repo: Path) -> None:
    _plain_app(repo)
    recurse = {"name": "recurse", "string": "true"}
    proc = generate("dir-app", [recurse], ARGOCD_APP_NAME="all")
    assert proc.returncode == 0 and "name: nested" in proc.stdout, proc.stderr
    include = {"name": "include", "string": "{sub/*,c.json}"}
    proc = generate("dir-app", [recurse, include], ARGOCD_APP_NAME="included")
    assert proc.returncode == 0, proc.stderr
    assert "name: nested" in proc.stdout and '"json"' in proc.stdout and "name: top" not in proc.stdout
    proc = generate("dir-app", [recurse, {"name": "exclude", "string": "sub/*"}], ARGOCD_APP_NAME="excluded")
    assert proc.returncode == 0 and "nested" not in proc.stdout and "name: top" in proc.stdout


def test_generate_names_a_jsonnet_file(generate: Generate, repo: Path) -> None:
    app = _plain_app(repo)
    (app / "guestbook.jsonnet").write_text("{}")
    proc = generate("dir-app")
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "driftguard: error: guestbook.jsonnet: jsonnet is not supported by driftguard"
    )


def test_a_symlink_out_of_a_subdirectory_nobody_reads_is_no_error(generate: Generate, repo: Path) -> None:
    """Argo CD checks the files it walks; a sub-directory left unread (no recurse) holds nothing it reads."""
    app = _plain_app(repo)
    (app / "sub" / "secret.yaml").symlink_to("/etc/hostname")
    assert generate("dir-app").returncode == 0
    proc = generate("dir-app", [{"name": "recurse", "string": "true"}], ARGOCD_APP_NAME="deep")
    assert proc.returncode == 2 and "illegal filepath in symlink" in proc.stderr
    assert "hostname" not in proc.stderr.replace("secret.yaml", "")


def test_options_for_another_tool_are_an_error_naming_them(generate: Generate, repo: Path) -> None:
    _plain_app(repo)
    proc = generate(
        "dir-app", [{"name": "values-files", "array": ["x.yaml"]}, {"name": "set", "map": {"a": "1"}}]
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        "driftguard: error: parameters values-files, set do not apply to this app: it renders with "
        "directory, and they are helm options; remove them from the Application's plugin parameters (or "
        "plugin env), or set the renderer parameter"
    )
    proc = generate("overlays/base", [{"name": "recurse", "string": "true"}])
    assert proc.returncode == 2 and "parameter recurse does not apply" in proc.stderr
    assert "and that is a directory option" in proc.stderr
    proc = generate("charts/web", ARGOCD_ENV_DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR="LoadRestrictionsRootOnly")
    assert proc.returncode == 2 and "kustomize-load-restrictor does not apply" in proc.stderr
    # the guards' options apply to every tool
    assert generate("dir-app", [{"name": "max-prune-count", "string": "3"}]).returncode == 0


# --- property: the selection is getPotentiallyValidManifests' ----------------------------------------

_NAMES = st.sampled_from(
    ["a.yaml", "b.yml", "c.json", "d.txt", "e.jsonnet", "A.yaml", "-x.yaml", ".h.yaml", "f.YAML"]
)
_DIRS = st.sampled_from(["sub", "Sub", "z", ".hidden", "a.yaml.d"])
_PATTERNS = st.sampled_from(
    ["", "*.yaml", "*", "sub/*", "**/*.yaml", "{a.yaml,z/*}", "?.json", "[a-c].*", "sub/a.yaml", "[", "*/*/*"]
)


@st.composite
def trees(draw: st.DrawFn) -> list[str]:
    files = draw(st.lists(_NAMES, max_size=4, unique=True))
    for d in draw(st.lists(_DIRS, max_size=3, unique=True)):
        files += [f"{d}/{n}" for n in draw(st.lists(_NAMES, max_size=3, unique=True))]
        for d2 in draw(st.lists(_DIRS, max_size=1, unique=True)):
            files += [f"{d}/{d2}/{n}" for n in draw(st.lists(_NAMES, max_size=2, unique=True))]
    return files


def reference(files: list[str], *, recurse: bool, include: str, exclude: str) -> list[str]:
    """getPotentiallyValidManifests over regular files (repository.go, v3.5.1), in filepath.Walk order."""
    from driftguard.globs import match  # gobwas without separators, tested on upstream's own cases

    ordered = sorted(files, key=lambda p: [part.encode() for part in p.split("/")])
    out = []
    for rel in ordered:
        name = rel.rsplit("/", 1)[-1]
        if "/" in rel and not recurse:
            continue  # filepath.SkipDir for every directory but the app path
        if not any(name.endswith(ext) for ext in (".yaml", ".yml", ".json", ".jsonnet")):
            continue
        if exclude != "" and match(exclude, rel):
            continue
        if include != "" and not match(include, rel):
            continue
        out.append(rel)
    return out


@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(files=trees(), recurse=st.booleans(), include=_PATTERNS, exclude=_PATTERNS)
def test_selection_matches_the_reference_model(
    tmp_path_factory: pytest.TempPathFactory, files: list[str], recurse: bool, include: str, exclude: str
) -> None:
    app = tmp_path_factory.mktemp("dir")
    try:
        for rel in files:
            (app / rel).parent.mkdir(parents=True, exist_ok=True)
            (app / rel).write_text("{}")
        got, _ = dirsource.select_files(
            app, app, recurse=recurse, include=include, exclude=exclude, max_bytes=BIG
        )
        assert [os.path.relpath(p, app) for p in got] == reference(
            files, recurse=recurse, include=include, exclude=exclude
        )
    finally:
        shutil.rmtree(app)

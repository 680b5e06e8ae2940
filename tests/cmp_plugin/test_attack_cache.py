"""Inputs that change a render (or a guard's verdict) and must change its fingerprint too.

Each test names the input a hostile or careless tenant can change; before the fix the fingerprint
(cmp_plugin/fingerprint.py) stayed equal, so the render cache served the old render and the PR
check reported the environment unchanged.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

from cmp_plugin import fingerprint
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.fingerprint import Fingerprint
from cmp_plugin.settings import CmpSettings
from driftguard.errors import InputError
from tests.cmp_plugin.conftest import Generate

HELM = os.environ["DRIFTGUARD_HELM"]
KUSTOMIZE = os.environ["DRIFTGUARD_KUSTOMIZE"]


def _env(params: dict[str, object] | None = None) -> AppEnv:
    parsed, explicit = parse_parameters({}, params or {})
    return AppEnv(app_name="demo", app_namespace="apps", params=parsed, explicit=explicit)


def _digest(app: Path, root: Path, renderer: str, params: dict[str, object] | None = None) -> str | None:
    settings = CmpSettings(helm=HELM, kustomize=KUSTOMIZE, cache_dir=root.parent / "cache")
    return fingerprint.compute(app, root, _env(params), settings, renderer, {}).digest


def _kustomize(app: Path) -> str:
    return subprocess.run(
        [KUSTOMIZE, "kustomize", str(app)], capture_output=True, text=True, check=True, timeout=60
    ).stdout


CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"


def test_a_kustomize_resource_with_an_equals_sign_is_hashed_by_its_whole_path(tmp_path: Path) -> None:
    """kustomize reads ``resources: [../common/base=v2]`` as that path; ``key=path`` is only the
    generators' ``files`` syntax. Hashing ``v2`` next to the kustomization instead left the base
    out of the fingerprint."""
    root = tmp_path / "checkout"
    base = root / "common" / "base=v2"
    base.mkdir(parents=True)
    (base / "kustomization.yaml").write_text("resources:\n- cm.yaml\n")
    (base / "cm.yaml").write_text(CM.format(name="one"))
    app = root / "app"
    (app / "v2").mkdir(parents=True)  # what the split path named: present, so no "not in the checkout"
    (app / "kustomization.yaml").write_text("resources:\n- ../common/base=v2\n")
    before, out_before = _digest(app, root, "kustomize"), _kustomize(app)
    (base / "cm.yaml").write_text(CM.format(name="two"))
    assert _kustomize(app) != out_before  # the real tool reads the base
    assert _digest(app, root, "kustomize") != before
    # a generator's files entry is key=path: the path is what is read (outside the kustomization:
    # the platform may open the load restrictor)
    (root / "common-files").mkdir()
    (root / "common-files" / "conf.txt").write_text("one\n")
    (app / "kustomization.yaml").write_text(
        "configMapGenerator:\n- name: conf\n  files:\n  - conf=../common-files/conf.txt\n"
    )
    before = _digest(app, root, "kustomize")
    (root / "common-files" / "conf.txt").write_text("two\n")
    assert _digest(app, root, "kustomize") != before


def _tgz(members: dict[str, str], *, top: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _parent_chart(root: Path) -> Path:
    chart = root / "app"
    (chart / "templates").mkdir(parents=True)
    (chart / "charts").mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 1.0.0\n")
    (chart / "templates" / "cm.yaml").write_text(CM.format(name="parent"))
    return chart


def _sub(template: str, values: str = "") -> dict[str, str]:
    return {
        "Chart.yaml": "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
        "values.yaml": values,
        "templates/cm.yaml": template,
    }


RANDOM = CM.format(name="sub") + "data:\n  v: {{ randAlphaNum 16 | quote }}\n"


def _helm(chart: Path) -> str:
    return subprocess.run(
        [HELM, "template", "r", str(chart)], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def test_a_subchart_archive_that_calls_a_random_function_is_not_cacheable(tmp_path: Path) -> None:
    """helm renders the templates inside ``charts/*.tgz`` (pkg/chart/loader/load.go: LoadArchive
    for a ``.tgz`` under charts/); the scan for nondeterministic calls read only files on disk."""
    root = tmp_path / "checkout"
    chart = _parent_chart(root)
    (chart / "charts" / "sub-0.1.0.tgz").write_bytes(_tgz(_sub(RANDOM), top="sub"))
    assert _helm(chart) != _helm(chart)  # the real render differs from run to run
    found = fingerprint.compute(
        chart, root, _env(), CmpSettings(helm=HELM, cache_dir=tmp_path / "cache"), "helm", {}
    )
    assert found.digest is None and "randAlphaNum" in found.why


def test_an_archive_in_an_archive_and_tpl_in_an_archive_are_read_too(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    chart = _parent_chart(root)
    inner = _tgz(_sub(RANDOM), top="sub")
    outer = _sub(CM.format(name="mid")) | {"charts/sub-0.1.0.tgz": ""}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in outer.items():
            data = inner if name.endswith(".tgz") else text.encode()
            info = tarfile.TarInfo(f"mid/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (chart / "charts" / "mid-0.1.0.tgz").write_bytes(buf.getvalue())
    assert _digest(chart, root, "helm") is None
    # a values file inside the archive rendered by tpl in the archive's template
    (chart / "charts" / "mid-0.1.0.tgz").unlink()
    tpl = CM.format(name="sub") + "data:\n  v: {{ tpl .Values.v . | quote }}\n"
    (chart / "charts" / "sub-0.1.0.tgz").write_bytes(_tgz(_sub(tpl, values='v: "{{ uuidv4 }}"\n'), top="sub"))
    assert _digest(chart, root, "helm") is None
    # a deterministic archive is still cached, and its content counts
    (chart / "charts" / "sub-0.1.0.tgz").write_bytes(_tgz(_sub(CM.format(name="a")), top="sub"))
    first = _digest(chart, root, "helm")
    assert first is not None
    (chart / "charts" / "sub-0.1.0.tgz").write_bytes(_tgz(_sub(CM.format(name="b")), top="sub"))
    assert _digest(chart, root, "helm") not in (None, first)


def test_an_archive_that_cannot_be_read_is_not_cached(tmp_path: Path) -> None:
    """What the scan cannot read is never served from the cache: refused, or not cacheable."""
    root = tmp_path / "checkout"
    chart = _parent_chart(root)
    (chart / "charts" / "sub-0.1.0.tgz").write_bytes(b"\x1f\x8b not really gzip")
    settings = CmpSettings(helm=HELM, cache_dir=tmp_path / "cache")
    try:
        found = fingerprint.compute(chart, root, _env(), settings, "helm", {})
    except InputError as exc:
        assert "sub-0.1.0.tgz" in str(exc)
    else:
        assert found.digest is None and "sub-0.1.0.tgz" in found.why


def test_a_stray_path_below_a_plain_directory_is_refused_after_a_cached_render(
    generate: Generate, repo: Path
) -> None:
    """Without ``recurse`` the directory renderer reads the top level only, but the stray-artifacts
    guard walks every sub-directory: a committed ``sub/helm-rendered/`` must not be served the
    render cached before it appeared."""
    (repo / "plain" / "sub").mkdir()
    first = generate("plain")
    assert first.returncode == 0, first.stderr
    assert list((repo.parent / "baseline-cache").glob("render-*.bin")), "the first render was not cached"
    (repo / "plain" / "sub" / "helm-rendered").mkdir()
    (repo / "plain" / "sub" / "helm-rendered" / "all.yaml").write_text(CM.format(name="stale"))
    again = generate("plain")
    assert again.returncode != 0 and "stray-artifacts" in again.stderr, again.stderr


def test_a_symlink_out_of_the_checkout_is_not_read_by_the_fingerprint(tmp_path: Path) -> None:
    """The directory renderer checks its symlinks as it reads (cmp_plugin/dirsource.py), after the
    fingerprint: the walk must not follow one out of the checkout (``z.yaml -> /dev/zero`` read
    to the end; a directory link to ``/`` walked and read). Not cacheable: the render refuses."""
    import sys

    root = tmp_path / "checkout"
    plain = root / "plain"
    plain.mkdir(parents=True)
    (plain / "cm.yaml").write_text(CM.format(name="a"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text(CM.format(name="outside"))
    (plain / "link").symlink_to(outside)
    for recurse in (False, True):
        found = fingerprint.compute(
            plain, root, _env({"recurse": str(recurse).lower()}), CmpSettings(), "directory", {}
        )
        assert found.digest is None and "outside" in found.why
        assert found.files == 1  # cm.yaml only: nothing behind the link was read
    (plain / "link").unlink()
    (plain / "z.yaml").symlink_to("/dev/zero")
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from pathlib import Path\n"
        "from cmp_plugin import fingerprint\n"
        "from cmp_plugin.argo_env import AppEnv, parse_parameters\n"
        "params, explicit = parse_parameters({})\n"
        "from cmp_plugin.settings import CmpSettings\n"
        f"found = fingerprint.compute(Path({str(plain)!r}), Path({str(root)!r}), AppEnv(params=params), CmpSettings(), "
        "'directory', {})\n"
        "print(found.digest, found.why)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("None ")


def test_date_functions_that_read_the_clock_are_not_cacheable(tmp_path: Path) -> None:
    """sprig's ``date`` family formats ``time.Now()`` for an argument that is not a time (a string,
    or a number from values, which helm reads as float64); ``durationRound`` of a time is
    ``time.Since`` it. Measured with the real helm: two renders differ."""
    root = tmp_path / "checkout"
    chart = _parent_chart(root)
    (chart / "values.yaml").write_text("ts: 1700000000\n")
    settings = CmpSettings(helm=HELM, cache_dir=tmp_path / "cache")
    for call in (
        'date "15:04:05.000000" .Values.ts',
        'dateInZone "15:04:05.000000" "x" "UTC"',
        'date_in_zone "15:04:05.000000" "x" "UTC"',
        'htmlDateInZone "x" "UTC"',
        "htmlDate .Values.ts",
        'toDate "2006-01-02" "2020-01-01" | durationRound',
    ):
        (chart / "templates" / "cm.yaml").write_text(
            CM.format(name="parent") + f"data:\n  v: {{{{ {call} | quote }}}}\n"
        )
        if "15:04" in call:  # a clock to the microsecond: two renders differ
            assert _helm(chart) != _helm(chart)
        found = fingerprint.compute(chart, root, _env(), settings, "helm", {})
        name = "durationRound" if "durationRound" in call else call.split()[0]
        assert found.digest is None and f"calls {name}," in found.why, (call, found)


def test_keys_and_values_of_a_map_unsorted_are_not_cacheable(tmp_path: Path) -> None:
    """sprig's ``keys`` / ``values`` range over a Go map: the order differs from render to render."""
    root = tmp_path / "checkout"
    chart = _parent_chart(root)
    (chart / "values.yaml").write_text("m: {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7}\n")
    settings = CmpSettings(helm=HELM, cache_dir=tmp_path / "cache")

    def with_data(line: str) -> Fingerprint:
        (chart / "templates" / "cm.yaml").write_text(CM.format(name="parent") + f"data:\n  v: {line}\n")
        return fingerprint.compute(chart, root, _env(), settings, "helm", {})

    for line in ('{{ keys .Values.m | join "," | quote }}', "{{ values .Values.m | toJson | quote }}"):
        found = with_data(line)
        assert len({_helm(chart) for _ in range(8)}) > 1  # the real render's order varies
        assert found.digest is None and "without sortAlpha" in found.why
    for line in (
        '{{ keys .Values.m | sortAlpha | join "," | quote }}',
        '{{- /* keys and values of the map */ -}} "x"',
        '{{ index .Values "m" | toJson | quote }}',
    ):
        assert with_data(line).digest is not None, line


def test_a_stricter_platform_policy_is_a_new_fingerprint_or_a_refusal(tmp_path: Path) -> None:
    """Held: the policy's defaults reach the fingerprint through the parameters (policy.apply runs
    before the cache is asked), and a tenant value the policy now forbids is refused before it."""
    import pytest

    from cmp_plugin import policy
    from driftguard.errors import GuardRefusal

    root = tmp_path / "checkout"
    chart = _parent_chart(root)
    path = tmp_path / "policy.yaml"
    settings = CmpSettings(helm=HELM, cache_dir=tmp_path / "cache", policy_file=str(path))

    def digest(params: dict[str, object] | None = None) -> str | None:
        env = policy.apply(_env(params), settings)
        return fingerprint.compute(chart, root, env, settings, "helm", {}).digest

    path.write_text('projects:\n  - project: "*"\n    parameters:\n      max-prune-count: 50\n')
    loose, tenant = digest(), digest({"max-prune-count": "40"})
    path.write_text('projects:\n  - project: "*"\n    parameters:\n      max-prune-count: 5\n')
    assert digest() != loose
    path.write_text(
        'projects:\n  - project: "*"\n    tenants-may-loosen: false\n    parameters:\n      max-prune-count: 5\n'
    )
    with pytest.raises(GuardRefusal):
        digest({"max-prune-count": "40"})
    assert tenant is not None


def test_subchart_archives_unpack_within_one_budget(tmp_path: Path) -> None:
    """Archives are scanned unpacked: many small ones that unpack large are not read without end."""
    root = tmp_path / "checkout"
    chart = _parent_chart(root)
    big = (fingerprint.MAX_ARCHIVE_BYTES // 2 + 1) * "\0"
    for name in ("one", "two"):
        members = _sub(CM.format(name=name)) | {"files/zeros.bin": big}
        (chart / "charts" / f"{name}-0.1.0.tgz").write_bytes(_tgz(members, top=name))
    found = fingerprint.compute(
        chart, root, _env(), CmpSettings(helm=HELM, cache_dir=tmp_path / "cache"), "helm", {}
    )
    assert found.digest is None and "unpack to more than" in found.why
    (chart / "charts" / "two-0.1.0.tgz").unlink()
    assert _digest(chart, root, "helm") is not None


def test_a_file_name_that_is_not_utf8_renders_with_the_cache_on(generate: Generate, repo: Path) -> None:
    """Git stores any bytes as a name and helm loads such a file; the fingerprint hashed the name
    as UTF-8 and crashed, so the render failed only because the cache was on."""
    name = os.path.join(os.fsencode(repo / "charts" / "platform"), b"notes-\xff.txt")
    with open(name, "wb") as f:
        f.write(b"not a template\n")
    off = generate("charts/platform", DRIFTGUARD_CMP_RENDER_CACHE_BYTES="0")
    assert off.returncode == 0, off.stderr
    for _ in range(2):  # a miss, then a hit
        on = generate("charts/platform")
        assert (on.returncode, on.stdout) == (0, off.stdout), on.stderr
    assert list((repo.parent / "baseline-cache").glob("render-*.bin"))


def test_inputs_that_held(tmp_path: Path) -> None:
    """Held in the attack, kept as a regression: each change below makes another fingerprint, and
    the revision alone does not (no render reads it; the shrink guard's approval is re-checked)."""
    root = tmp_path / "checkout"
    chart = _parent_chart(root)
    (chart / "files").mkdir()
    (chart / "files" / "conf.txt").write_text("one\n")  # read with .Files.Get, outside templates/
    (root / "targets").mkdir()
    (root / "targets" / "a.yaml").write_text(CM.format(name="a"))
    (root / "targets" / "b.yaml").write_text(CM.format(name="b"))
    (chart / "templates" / "linked.yaml").symlink_to("../../targets/a.yaml")
    settings = CmpSettings(helm=HELM, cache_dir=tmp_path / "cache")
    base = {"app_name": "demo", "app_namespace": "apps", "revision": "a" * 40}

    def digest(**fields: object) -> str | None:
        params, explicit = parse_parameters({})
        env = AppEnv(**{**base, **fields}, params=params, explicit=explicit)  # type: ignore[arg-type]
        return fingerprint.compute(chart, root, env, settings, "helm", {}).digest

    seen = {digest()}
    assert digest(revision="b" * 40) in seen
    for field, value in (
        ("app_name", "other"),
        ("app_namespace", "other"),
        ("project", "other"),
        ("repo_url", "https://git.example.com/other.git"),
        ("kube_version", "1.30.0"),
        ("api_versions", ("example.com/v1",)),
    ):
        found = digest(**{field: value})
        assert found not in seen, field
        seen.add(found)
    for change in (
        lambda: (chart / "files" / "conf.txt").write_text("two\n"),
        lambda: (chart / ".helmignore").write_text("files/\n"),
        lambda: (chart / "Chart.lock").write_text("dependencies: []\n"),
        lambda: (
            (chart / "templates" / "linked.yaml").unlink(),
            (chart / "templates" / "linked.yaml").symlink_to("../../targets/b.yaml"),
        ),
        lambda: (root / "targets" / "b.yaml").write_text(CM.format(name="b2")),
    ):
        change()
        found = digest()
        assert found not in seen
        seen.add(found)

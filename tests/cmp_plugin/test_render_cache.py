"""The render fingerprint and the render cache (cmp_plugin/fingerprint.py, cmp_plugin/render_cache.py).

Whether a render was served from the cache is counted, never timed: helm is a wrapper that logs
each run (outside the cache dir) and then runs the real helm.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmp_plugin import fingerprint, sandbox
from cmp_plugin.argo_env import AppEnv, parse_parameters
from cmp_plugin.settings import CmpSettings
from tests.cmp_plugin.conftest import HERE, Generate

HELM = os.environ["DRIFTGUARD_HELM"]
KINDS = ("template", "values-file", "subchart", "kustomize-patch", "parameter", "tool-version", "env")


def _checkout(root: Path) -> Path:
    dest = root / "checkout"
    shutil.copytree(HERE / "repo", dest)
    overlay = dest / "overlays" / "prod"
    (overlay / "patch.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  minReadySeconds: 5\n"
    )
    kustomization = overlay / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text() + "patches:\n  - path: patch.yaml\n")
    return dest


def _helm_wrapper(path: Path, log: Path, extra: str = "") -> Path:
    path.write_text(f'#!/bin/sh\necho run >> "{log}"\n{extra}exec "{HELM}" "$@"\n')
    path.chmod(0o755)
    return path


class _World:
    """A checkout, its tools and its environment: one input of each kind can be changed."""

    def __init__(self, root: Path) -> None:
        self.repo = _checkout(root)
        self.helm = _helm_wrapper(root / "helm", root / "helm.log")
        self.params: dict[str, object] = {"values-files": ["../../envs/prod-web.yaml"]}
        self.environ = {"DRIFTGUARD_HELM": str(self.helm), "ARGOCD_ENV_TEAM": "web"}
        self.settings = CmpSettings(helm=str(self.helm), cache_dir=root / "cache")

    def digest(self, app: str, renderer: str) -> str | None:
        params, explicit = parse_parameters({}, self.params if renderer == "helm" else {})
        env = AppEnv(
            app_name="web",
            app_namespace="apps",
            source_path=app,
            params=params,
            explicit=explicit,
            env={k[len("ARGOCD_ENV_") :]: v for k, v in self.environ.items() if k.startswith("ARGOCD_ENV_")},
        )
        found = fingerprint.compute(self.repo / app, self.repo, env, self.settings, renderer, self.environ)
        assert found.digest is not None, found.why
        return found.digest

    def change(self, kind: str, text: str) -> tuple[str, str]:
        """Change one input of ``kind``; the (app, renderer) whose render reads it."""
        chart = ("charts/web", "helm")
        if kind == "template":
            f = self.repo / "charts/web/templates/deployment.yaml"
            f.write_text(f.read_text() + f"\n{{{{- /* {text} */}}}}\n")
        elif kind == "values-file":
            f = self.repo / "envs/prod-web.yaml"
            f.write_text(f.read_text() + f"\nnote{len(text)}: {text!r}\n")
        elif kind == "subchart":
            f = self.repo / "charts/web/charts/redis/values.yaml"
            f.write_text(f.read_text() + f"\n# {text}\n")
        elif kind == "kustomize-patch":
            f = self.repo / "overlays/prod/patch.yaml"
            f.write_text(f.read_text() + f"  # {text}\n")
            return "overlays/prod", "kustomize"
        elif kind == "parameter":
            self.params["namespace"] = "x" + text
        elif kind == "tool-version":  # a new binary in place of the old (another size, mtime, inode)
            new = self.helm.with_name("helm.new")
            new.write_text(self.helm.read_text() + f"# {text}\n")
            new.chmod(0o755)
            new.replace(self.helm)
        elif kind == "env":
            self.environ["ARGOCD_ENV_TEAM"] = "web-" + text
        return chart


names = st.from_regex(r"[a-z][a-z0-9]{0,12}", fullmatch=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(KINDS), names), min_size=1, max_size=4))
def test_any_changed_input_changes_the_fingerprint(tmp_path_factory, changes: list[tuple[str, str]]) -> None:
    world = _World(tmp_path_factory.mktemp("fp"))
    for i, (kind, drawn) in enumerate(changes):
        text = f"{drawn}{i}"  # a change each time, even when the same text is drawn twice
        app, renderer = (
            ("overlays/prod", "kustomize") if kind == "kustomize-patch" else ("charts/web", "helm")
        )
        before = world.digest(app, renderer)
        assert world.digest(app, renderer) == before  # unchanged inputs: the same fingerprint
        world.change(kind, text)
        after = world.digest(app, renderer)
        assert after != before, f"changing the {kind} left the fingerprint as it was"


def test_fingerprint_of_a_checkout_elsewhere_is_the_same(tmp_path: Path) -> None:
    """The PR check compares two worktrees: paths count relative to the checkout, not absolutely."""
    one, two = _World(tmp_path / "one"), _World(tmp_path / "two")
    two.helm, two.environ, two.settings = one.helm, one.environ, one.settings
    assert one.digest("charts/web", "helm") == two.digest("charts/web", "helm")


def test_the_fingerprint_reads_each_file_once(tmp_path: Path) -> None:
    """Linear in the bytes read: the files hashed are the chart's tree, once each."""
    world = _World(tmp_path)
    params, explicit = parse_parameters({}, world.params)
    env = AppEnv(app_name="web", params=params, explicit=explicit)
    found = fingerprint.compute(
        world.repo / "charts/web", world.repo, env, world.settings, "helm", world.environ
    )
    chart_files = [p for p in (world.repo / "charts/web").rglob("*") if p.is_file()]
    common = [p for p in (world.repo / "charts/common").rglob("*") if p.is_file()]
    expected = [*chart_files, *common, world.repo / "envs/prod-web.yaml"]
    assert found.files == len(expected)
    assert found.bytes == sum(p.stat().st_size for p in expected)


def _chart(root: Path, name: str, template: str) -> Path:
    chart = root / name
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 1.0.0\n")
    (chart / "values.yaml").write_text("name: demo\n")
    (chart / "templates" / "cm.yaml").write_text(template)
    return chart


CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\ndata:\n  v: {{ %s | quote }}\n"


def test_nondeterministic_functions_make_a_render_not_cacheable(tmp_path: Path) -> None:
    settings_ = CmpSettings(helm=HELM, cache_dir=tmp_path / "cache")
    params, explicit = parse_parameters({}, {})
    env = AppEnv(app_name="demo", params=params, explicit=explicit)
    for i, call in enumerate(fingerprint.NONDETERMINISTIC):
        chart = _chart(tmp_path, f"c{i}", CM % call)
        found = fingerprint.compute(chart, tmp_path, env, settings_, "helm", {})
        assert found.digest is None and call in found.why
    # a field or variable of that name is not a call
    chart = _chart(tmp_path, "fields", CM % ".Values.now")
    assert fingerprint.compute(chart, tmp_path, env, settings_, "helm", {}).digest is not None
    # through tpl, a values file may call them too
    chart = _chart(tmp_path, "tpl", CM % "tpl .Values.name .")
    (chart / "values.yaml").write_text('name: "{{ randAlpha 3 }}"\n')
    found = fingerprint.compute(chart, tmp_path, env, settings_, "helm", {})
    assert found.digest is None and "tpl" in found.why


def _helm_runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_an_unchanged_render_is_served_byte_identical_without_a_tool(
    generate: Generate, repo: Path, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    helm = _helm_wrapper(logs / "helm", logs / "helm.log")
    common = {
        "DRIFTGUARD_HELM": str(helm),
        "DRIFTGUARD_CMP_TOOL_READ_PATHS": f"{Path(HELM).parent}:{logs}",
        "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": str(logs),
    }
    params = [{"name": "values-files", "array": ["../../envs/prod-web.yaml"]}]
    # cache off: the baseline and the implicit-defaults proofs are there before the cache is used
    warm = generate("charts/web", params, DRIFTGUARD_CMP_RENDER_CACHE_BYTES="0", **common)
    assert warm.returncode == 0, warm.stderr
    assert sandbox.available(), "the render cache needs Landlock (cmp_plugin/render_cache.usable)"
    cache = repo.parent / "baseline-cache"
    log = logs / "helm.log"
    miss = generate("charts/web", params, **common)
    after_miss = _helm_runs(log)
    assert miss.returncode == 0, miss.stderr
    assert len(list(cache.glob("render-*.bin"))) == 1
    hits = [generate("charts/web", params, **common) for _ in range(2)]
    assert _helm_runs(log) == after_miss, "a hit ran helm"
    for hit in hits:  # the same bytes out and the same stderr lines, guards' included
        assert (hit.returncode, hit.stdout, hit.stderr) == (0, miss.stdout, miss.stderr)
    # one values file changed: a miss (helm runs again) with an entry of its own
    values = repo / "envs/prod-web.yaml"
    values.write_text(values.read_text() + "\nunrelated: 1\n")
    changed = generate("charts/web", params, **common)
    assert changed.returncode == 0 and _helm_runs(log) > after_miss
    assert len(list(cache.glob("render-*.bin"))) == 2


def test_renders_count_helm_runs_per_hit(generate: Generate, repo: Path, tmp_path: Path) -> None:
    """A hit runs no helm at all: the second of two identical renders adds no line to the log."""
    logs = tmp_path / "logs"
    logs.mkdir()
    helm = _helm_wrapper(logs / "helm", logs / "helm.log")
    env = {
        "DRIFTGUARD_HELM": str(helm),
        "DRIFTGUARD_CMP_TOOL_READ_PATHS": f"{Path(HELM).parent}:{logs}",
        "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": str(logs),
    }
    params = [{"name": "implicit-defaults", "string": "off"}]
    assert generate("charts/platform", params, **env).returncode == 0
    after_miss = _helm_runs(logs / "helm.log")
    assert after_miss >= 1
    hit = generate("charts/platform", params, **env)
    assert hit.returncode == 0 and _helm_runs(logs / "helm.log") == after_miss


def test_a_nondeterministic_chart_is_never_cached(generate: Generate, repo: Path, tmp_path: Path) -> None:
    _chart(repo / "charts", "random", CM % "randAlphaNum 16")
    outs = [generate("charts/random") for _ in range(3)]
    assert all(o.returncode == 0 for o in outs), outs[0].stderr
    assert len({o.stdout for o in outs}) == 3  # 62^16 values: three equal renders mean a cache
    assert not list((repo.parent / "baseline-cache").glob("render-*.bin"))


def test_a_render_tool_cannot_write_the_cache(generate: Generate, repo: Path, tmp_path: Path) -> None:
    cache = repo.parent / "baseline-cache"
    assert generate("charts/platform").returncode == 0
    entries = {p: p.read_bytes() for p in cache.glob("render-*.bin")}
    assert entries, "the first render was not cached"
    tools = tmp_path / "tools"
    tools.mkdir()
    hostile = tools / "helm"
    hostile.write_text(
        "#!/bin/sh\n"
        f'for f in "{cache}"/render-*.bin; do echo pwned > "$f" 2>/dev/null && w=yes; done\n'
        f'echo pwned > "{cache}/render-planted.bin" 2>/dev/null && w=yes\n'
        f'touch "{cache}/render-touched.bin" 2>/dev/null && w=yes\n'
        f'mv "{cache}" "{cache}.gone" 2>/dev/null && w=yes\n'
        'printf \'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: hostile\\ndata:\\n  wrote: "%s"\\n\' "${w:-no}"\n'
    )
    hostile.chmod(0o755)
    proc = generate(
        "charts/platform",
        DRIFTGUARD_HELM=str(hostile),
        DRIFTGUARD_CMP_TOOL_READ_PATHS=f"{Path(HELM).parent}:{tools}",
        ARGOCD_APP_NAME="hostile",  # another Application sharing the cache: no shrink baseline
    )
    assert proc.returncode == 0, proc.stderr
    assert 'wrote: "no"' in proc.stdout
    assert cache.is_dir() and not Path(f"{cache}.gone").exists()
    assert not (cache / "render-planted.bin").exists() and not (cache / "render-touched.bin").exists()
    for path, data in entries.items():
        assert path.read_bytes() == data
    assert not any(b"pwned" in p.read_bytes() for p in cache.glob("render-*.bin"))


def test_the_pr_check_renders_only_environments_whose_inputs_changed(tmp_path: Path) -> None:
    import json

    from tests.cmp_plugin.gitrepo import REPO_URL, Repo
    from tests.helpers import run_cmp

    repo = Repo(tmp_path / "gitops")
    names = ("alpha", "beta", "gamma", "delta")
    for name in names:
        chart = _chart(tmp_path / "charts", name, CM % ".Values.v")
        for f in chart.rglob("*"):
            if f.is_file():
                repo.write(f"charts/{name}/{f.relative_to(chart)}", f.read_text())
        repo.write(f"charts/{name}/values.yaml", f"name: {name}\nv: one\n")
        repo.write(
            f"apps/{name}.yaml",
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Application",
                "metadata": {"name": name, "namespace": "argocd"},
                "spec": {
                    "project": "default",
                    "source": {"repoURL": REPO_URL, "targetRevision": "main", "path": f"charts/{name}"},
                    "destination": {"namespace": name},
                },
            },
        )
    base = repo.commit("base")
    repo.write("charts/beta/values.yaml", "name: beta\nv: two\n")
    head = repo.commit("one values file")
    logs = tmp_path / "logs"
    logs.mkdir()
    helm = _helm_wrapper(logs / "helm", logs / "helm.log")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "DRIFTGUARD_HELM": str(helm),
        "DRIFTGUARD_KUSTOMIZE": os.environ["DRIFTGUARD_KUSTOMIZE"],
        "DRIFTGUARD_CMP_TOOL_READ_PATHS": f"{Path(HELM).parent}:{logs}",
        "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": str(logs),
    }
    proc = run_cmp(repo.path, env, "diff", "--base", base, "--head", head, "apps/", "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    by_name = {e["name"]: e for e in json.loads(proc.stdout)["environments"]}
    assert sorted(by_name) == sorted(names)
    assert by_name["beta"]["counts"]["changed"] == 1
    for name in ("alpha", "gamma", "delta"):
        assert by_name[name]["counts"] == {**by_name[name]["counts"], "removed": 0, "added": 0, "changed": 0}
        assert not by_name[name]["failed"]
    assert _helm_runs(logs / "helm.log") == 2  # beta at base and at head; the others not at all


def test_the_pr_check_uses_the_cores_it_may() -> None:
    from cmp_plugin.prcheck.envdiff import workers

    cores = len(os.sched_getaffinity(0))
    assert workers(1000) == cores
    assert workers(1) == 1


def test_no_cache_where_a_tool_could_write_it(tmp_path: Path) -> None:
    from cmp_plugin import render_cache

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    outside = CmpSettings(cache_dir=tmp_path / "cache")
    assert render_cache.usable(outside, checkout) == sandbox.available()
    assert not render_cache.usable(CmpSettings(cache_dir=checkout / ".cache"), checkout)
    writable = outside._replace(tool_write_paths=f"/nonexistent:{tmp_path}")
    assert not render_cache.usable(writable, checkout)
    assert not render_cache.usable(outside._replace(render_cache_bytes=0), checkout)


def test_entries_are_bounded_and_the_least_recently_used_go_first(tmp_path: Path) -> None:
    from cmp_plugin import render_cache
    from driftguard.manifests import ResourceKey

    key = ResourceKey("", "ConfigMap", "apps", "a")
    settings_ = CmpSettings(cache_dir=tmp_path, render_cache_bytes=3500)  # three entries of ~1 KB
    for i in range(6):
        assert render_cache.store(
            settings_, f"{i:064x}", text="x" * 900, renderer="helm", warnings=[], keys=[key], kept=[key]
        )
        os.utime(tmp_path / f"render-{i:064x}.bin", ns=(i * 10**9, i * 10**9))
        if i == 3:
            assert render_cache.load(settings_, f"{0:064x}") is None  # already evicted
            hit = render_cache.load(settings_, f"{1:064x}")  # used: the newest now
            assert hit is not None and hit.text == "x" * 900 and hit.kept == [key]
    left = sorted(p.name for p in tmp_path.glob("render-*.bin"))
    assert sum(p.stat().st_size for p in tmp_path.glob("render-*.bin")) <= 3500
    assert f"render-{1:064x}.bin" in left and f"render-{2:064x}.bin" not in left


def test_a_plain_directory_is_hashed_as_deep_as_it_is_read(tmp_path: Path) -> None:
    world = _World(tmp_path)
    plain = world.repo / "plain"
    (plain / "sub").mkdir()
    (plain / "sub" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")

    def digest(recurse: bool) -> str | None:
        params, explicit = parse_parameters({}, {"recurse": "true"} if recurse else {})
        env = AppEnv(app_name="plain", params=params, explicit=explicit)
        return fingerprint.compute(plain, world.repo, env, world.settings, "directory", {}).digest

    before = digest(False), digest(True)
    (plain / "sub" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
    assert digest(False) == before[0]  # not read without recurse
    assert digest(True) != before[1]
    (plain / "app.yml").write_text((plain / "app.yml").read_text() + "\n# changed\n")
    assert digest(False) != before[0]


def test_a_lock_that_names_a_remote_repository_is_not_cacheable(tmp_path: Path) -> None:
    """helm dependency build fetches the lock's dependencies once its digest matches
    (helm pkg/downloader/manager.go Build): a remote one in Chart.lock, behind a Chart.yaml whose
    own dependencies are all in the checkout, still makes the render read the network."""
    settings_ = CmpSettings(helm=HELM, cache_dir=tmp_path / "cache")
    params, explicit = parse_parameters({}, {})
    env = AppEnv(app_name="demo", params=params, explicit=explicit)
    _chart(tmp_path, "lib", CM % '"x"')
    chart = _chart(tmp_path, "app", CM % '"x"')
    with (chart / "Chart.yaml").open("a") as f:
        f.write("dependencies:\n- name: lib\n  version: 1.0.0\n  repository: file://../lib\n")
    assert fingerprint.compute(chart, tmp_path, env, settings_, "helm", {}).digest is not None
    (chart / "Chart.lock").write_text(
        "dependencies:\n- name: lib\n  version: 1.0.0\n  repository: https://charts.example.com\n"
    )
    found = fingerprint.compute(chart, tmp_path, env, settings_, "helm", {})
    assert found.digest is None and "lib" in found.why

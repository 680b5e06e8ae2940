"""``driftguard-cmp hook ...``: the pre-commit hooks of a GitOps repository (.pre-commit-hooks.yaml).

The post-mortem's chain started on a laptop: a rebase reverted ``.gitignore`` and stale
``helm-rendered/`` output was committed. These hooks stop each link before it reaches a PR:

- ``stray``: a staged path is render output (the CMP's stray-artifact patterns);
- ``gitignore``: the repository's ignore rules no longer keep render output out (asked of git
  itself with ``git check-ignore``, so every .gitignore level and negation counts as git counts it);
- ``render``: every app directory with a changed file renders and passes the guards
  (``driftguard-cmp render``), so a broken template never waits for Argo CD to say so.
"""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from cmp_plugin.settings import CmpSettings

__all__ = ["main"]

MARKERS = ("Chart.yaml", "kustomization.yaml", "kustomization.yml", "Kustomization")
# where render output usually lands: next to the repo root and next to each app
PROBES = ("{d}helm-rendered/deployment.yaml", "{d}kustomize-build/all.yaml", "{d}values.local.yaml")


def stray(files: list[str], patterns: tuple[str, ...]) -> list[str]:
    """The files among ``files`` that sit in, or are, render output."""
    found = []
    for name in files:
        parts = PurePosixPath(name).parts
        if any(fnmatch.fnmatchcase(part, p) for part in parts for p in patterns):
            found.append(name)
    return found


def not_ignored(repo: Path, app_dirs: list[str]) -> list[str]:
    """Probe paths of render output that git would not ignore."""
    probes = [p.format(d=d) for d in ["", *(f"{a}/" for a in app_dirs)] for p in PROBES]
    # --no-index: a path that is tracked already must still count as "should be ignored"
    out = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin", "-z"],
        input="\0".join(probes) + "\0",
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode > 1:
        raise SystemExit(f"driftguard: error: git check-ignore failed: {out.stderr.strip()[:300]}")
    ignored = set(filter(None, out.stdout.split("\0")))
    return [p for p in probes if p not in ignored]


def app_dirs_of(files: list[str], repo: Path) -> list[str]:
    """The nearest directory with a chart or kustomization marker above each changed file."""
    found: set[str] = set()
    for name in files:
        here = (repo / name).parent
        while here != repo and repo in here.parents:
            if any((here / m).is_file() for m in MARKERS):
                found.add(here.relative_to(repo).as_posix())
                break
            here = here.parent
    return sorted(found)


def repo_root() -> Path:
    out = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit("driftguard: error: not inside a git repository")
    return Path(out.stdout.strip())


def main(argv: list[str], *, render: Callable[[list[str]], int]) -> int:
    """One hook; ``render`` runs a ``driftguard-cmp`` command line (the CLI passes its own ``main``)."""
    if not argv or argv[0] not in ("stray", "gitignore", "render"):
        print("usage: driftguard-cmp hook stray|gitignore|render [FILES...]", file=sys.stderr)
        return 2
    what, files = argv[0], argv[1:]
    settings = CmpSettings.from_env()
    repo = repo_root()
    if what == "stray":
        found = stray(files, settings.stray_patterns)
        for name in found:
            print(f"driftguard: {name}: render output must not be committed (git rm --cached it)")
        return 1 if found else 0
    if what == "gitignore":
        apps = [
            str(p.parent.relative_to(repo)) for m in MARKERS for p in repo.rglob(m) if ".git" not in p.parts
        ]
        missing = not_ignored(repo, sorted(set(apps) - {"."}))
        for probe in missing:
            print(
                f"driftguard: {probe} would not be ignored: add helm-rendered/, kustomize-build/, *.local.yaml to .gitignore"
            )
        return 1 if missing else 0
    failed = 0
    for app in app_dirs_of(files, repo):
        if stray([app], settings.stray_patterns):
            continue  # the stray hook names these
        code = render(["render", str(repo / app)])
        failed = failed or code
    return 1 if failed else 0

"""Shared test set-up: the real render tools installed by `make tools`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools" / "bin"

# `make test` exports these; a bare `pytest` finds the same pinned binaries.
os.environ.setdefault("DRIFTGUARD_HELM", str(TOOLS / "helm"))
os.environ.setdefault("DRIFTGUARD_KUSTOMIZE", str(TOOLS / "kubectl"))
for var in ("DRIFTGUARD_HELM", "DRIFTGUARD_KUSTOMIZE"):
    if not Path(os.environ[var]).is_file():
        raise RuntimeError(f"{var}={os.environ[var]} does not exist: run `make tools` (or `make test`)")

# The lanes (docs/development.md, Tests): `make test` sets DRIFTGUARD_TEST_LANE=fast and leaves out
# the tests marked slow; `make test-all` sets it to "all" and runs every test, property tests with
# the `ci` profile's larger example count (tests/helpers.py ``examples`` scales explicit counts).
settings.register_profile("fast", max_examples=25, deadline=None)
settings.register_profile("ci", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("DRIFTGUARD_TEST_LANE") == "all" else "fast")

# `make test` must pass on a clone with nothing beside it: any read of the shared folder beside the
# project (where CI and the developers keep the corpora) from inside the test process fails loudly.
SHARED = os.path.join(os.path.dirname(ROOT), "shared")  # the folder this guard keeps tests out of


def _no_shared(event: str, args: tuple[object, ...]) -> None:
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, os.PathLike)):
        path = os.path.abspath(os.fspath(args[0]))  # type: ignore[arg-type]
        if path == SHARED or path.startswith(SHARED + os.sep):
            raise PermissionError(
                f"make test read {path}: copy what tests need into the project (see SOURCES.md)"
            )


sys.addaudithook(_no_shared)

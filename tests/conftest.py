"""Shared test set-up: the real render tools installed by `make tools`."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools" / "bin"

# `make test` exports these; a bare `pytest` finds the same pinned binaries.
os.environ.setdefault("DRIFTGUARD_HELM", str(TOOLS / "helm"))
os.environ.setdefault("DRIFTGUARD_KUSTOMIZE", str(TOOLS / "kubectl"))
for var in ("DRIFTGUARD_HELM", "DRIFTGUARD_KUSTOMIZE"):
    if not Path(os.environ[var]).is_file():
        raise RuntimeError(f"{var}={os.environ[var]} does not exist: run `make tools` (or `make test`)")

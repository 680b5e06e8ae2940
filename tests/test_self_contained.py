"""A clone with nothing beside it passes `make test`: the reference files are in the project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "reference"
# Everything `make test` and `make demo` run: the tests, the stand-ins, the demo, the packages.
SOURCES = [
    "tests",
    "standins",
    "scripts/demo.py",
    "driftguard",
    "driftguard_serve",
    "cmp_plugin",
    "notifier",
    "analysis_provider",
]


def listed_reference_files() -> list[str]:
    table = (REFERENCE / "SOURCES.md").read_text()
    return re.findall(r"^\| `([^`]+)` \|", table, flags=re.M)


def test_every_listed_reference_file_is_in_the_project() -> None:
    listed = listed_reference_files()
    assert len(listed) >= 10, listed
    on_disk = sorted(
        p.relative_to(REFERENCE).as_posix() for p in REFERENCE.rglob("*") if p.is_file() and p.suffix != ".md"
    )
    assert sorted(listed) == on_disk


def test_no_source_that_make_test_runs_names_the_shared_folder() -> None:
    offenders = []
    for name in SOURCES:
        base = ROOT / name
        for path in [base] if base.is_file() else sorted(base.rglob("*.py")):
            if path in (Path(__file__), ROOT / "tests" / "conftest.py"):  # the guard itself
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                # a path built in code: a string literal naming the sibling folder, or a "shared" segment
                if re.search(r"""["'][^"'#]*\.\./shared|["']shared["']""", line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, offenders


def test_reading_the_shared_folder_fails_inside_the_suite(tmp_path: Path) -> None:
    # the guard in tests/conftest.py: proves it is installed and catches a read at the call
    with pytest.raises(PermissionError, match="copy what tests need into the project"):
        Path(SHARED, "corpus", "README.md").read_text()

"""No import cycle inside any first-party package, function-level imports included.

scripts/import_graph.py builds each package's graph with ``ast`` (nothing is imported; nested
imports count, ``TYPE_CHECKING`` blocks do not) and ``make lint`` runs it; this test runs the same
check over every package, shows with a planted package that a cycle through a function-level
import is caught, and holds every console script's module to being imported by nothing.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
assert _spec is not None and _spec.loader is not None
import_graph = importlib.util.module_from_spec(_spec)
sys.modules["import_graph"] = import_graph
_spec.loader.exec_module(import_graph)


@pytest.mark.parametrize("package", import_graph.PACKAGES)
def test_no_package_has_an_import_cycle(package: str) -> None:
    assert import_graph.cycles(import_graph.graph(package)) == []


def test_a_cycle_through_nested_imports_is_caught(tmp_path: Path) -> None:
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from planted.a import f\n")  # a package's own __init__ is no edge back
    (pkg / "a.py").write_text("def f():\n    from planted import b\n    return b\n")
    (pkg / "b.py").write_text("from planted.c import x\n")
    (pkg / "c.py").write_text("x = 1\n\n\ndef g():\n    from . import a\n    return a\n")
    (pkg / "d.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from planted import a\nfrom planted import c\n"
    )
    (pkg / "e.py").write_text("from planted import d\n")
    edges = import_graph.graph("planted", tmp_path)
    assert edges["planted.d"] == {"planted.c"}  # the TYPE_CHECKING import runs never
    assert import_graph.cycles(edges) == [["planted.a", "planted.b", "planted.c"]]
    assert import_graph.main([]) == 0  # the real packages, as `make lint` runs it


def test_each_console_script_module_is_imported_by_nothing() -> None:
    """The console entry is a thin module: only the package's own ``__main__`` may run it."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["driftguard-cmp"] == scripts["driftguard-cmp-py"] == "cmp_plugin.__main__:main"
    for name, target in scripts.items():
        module = target.partition(":")[0]
        package = module.partition(".")[0]
        edges = import_graph.graph(package)
        assert module in edges, name
        importers = sorted(m for m, needs in edges.items() if module in needs and m != f"{package}.__main__")
        assert importers == [], f"{name}: {module} is imported by {importers}"


def _first_party_imports(path: Path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.split(".")[0] in import_graph.PACKAGES
        for alias in node.names
    ]


@pytest.mark.parametrize(
    "script",
    sorted(p.relative_to(ROOT).as_posix() for d in ("scripts", "bench") for p in (ROOT / d).glob("*.py")),
)
def test_scripts_and_benches_import_what_exists(script: str) -> None:
    """No test runs every script and bench (make corpus, make bench do): a moved module or name
    would only show there, so each of their imports, nested ones included, is resolved here."""
    for module, name in _first_party_imports(ROOT / script):
        loaded = importlib.import_module(module)
        assert hasattr(loaded, name) or importlib.util.find_spec(f"{module}.{name}") is not None, (
            f"{script}: from {module} import {name}"
        )

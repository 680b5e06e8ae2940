"""The layering rule: apps import driftguard; driftguard imports no app; apps never import each other."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("cmp_plugin", "notifier", "analysis_provider")
FORBIDDEN = {
    "driftguard": {*APPS, "flask", "gunicorn", "driftguard_serve"},
    # the serving layer (gunicorn's worker): gunicorn loads it by name, nothing imports it
    "driftguard_serve": {*APPS, "flask"},
    "cmp_plugin": {"notifier", "analysis_provider", "flask", "gunicorn", "driftguard_serve"},
    "notifier": {"cmp_plugin", "analysis_provider", "driftguard_serve"},
    "analysis_provider": {"cmp_plugin", "notifier", "driftguard_serve"},
}


def imported_roots(source: str) -> set[str]:
    """Top-level package names a module imports, at any depth of the file."""
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def violations(package: str) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_roots(path.read_text()) & FORBIDDEN[package]
        found += [f"{path.relative_to(ROOT)} imports {name}" for name in sorted(bad)]
    return found


def test_checker_catches_a_planted_import() -> None:
    assert imported_roots("from notifier.app import create_app\n") & FORBIDDEN["driftguard"]
    assert imported_roots("def f():\n    import cmp_plugin.cli\n") & FORBIDDEN["driftguard"]


def test_driftguard_imports_no_app() -> None:
    assert violations("driftguard") == []


def test_apps_do_not_import_each_other() -> None:
    for app in APPS:
        assert violations(app) == [], app

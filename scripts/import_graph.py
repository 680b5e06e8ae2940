"""The import graph of each first-party package, nested (function-level) imports included.

Every module is parsed with ``ast`` (nothing is imported); each ``import``/``from ... import``
anywhere in it, inside functions too, is an edge to the module it needs: ``import a.b`` and
``from a.b import f`` need ``a.b``; ``from a import b`` needs the submodule ``a.b`` when there is
one, else ``a`` (a package's ``__init__`` running before its submodules is not counted). A cycle
inside one package is printed and the exit status is 1. ``TYPE_CHECKING`` blocks are skipped:
they never run.

    python scripts/import_graph.py [PACKAGE ...]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cmp_plugin", "notifier", "analysis_provider", "driftguard", "driftguard_serve")


def modules(package: str, root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package`` (a folder under ``root``)."""
    found: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.Module, name: str, is_package: bool) -> list[str]:
    """Every dotted name an import in ``tree`` may load (a name or a submodule)."""
    out: list[str] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join([*here, base] if base else here)
            out.extend(f"{base}.{alias.name}\0{base}" for alias in node.names)
        stack.extend(ast.iter_child_nodes(node))
    return out


def graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of the same package that importing it runs."""
    mods = modules(package, root)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for target in _imported(tree, name, path.name == "__init__.py"):
            dotted, _, base = target.partition("\0")
            if dotted not in mods and base:
                dotted = base
            if dotted in mods and dotted != name:
                edges[name].add(dotted)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main(argv: list[str]) -> int:
    status = 0
    for package in argv or PACKAGES:
        for component in cycles(graph(package)):
            status = 1
            print(f"{package}: import cycle among {len(component)} modules: {', '.join(component)}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The ApplicationSet generators driftguard expands, by their key under ``spec.generators[]``.

Adding one is a new module behind the ``Generator`` Protocol (base.py), one line below and its
tests (docs/development.md, "Add an ApplicationSet generator").
"""

from __future__ import annotations

from cmp_plugin.prcheck.appset.base import Generator
from cmp_plugin.prcheck.appset.clusters import ClustersGenerator
from cmp_plugin.prcheck.appset.git import GitGenerator
from cmp_plugin.prcheck.appset.listgen import ListGenerator
from cmp_plugin.prcheck.appset.matrix import MatrixGenerator
from cmp_plugin.prcheck.appset.merge import MergeGenerator

__all__ = ["GENERATORS"]

GENERATORS: dict[str, Generator] = {
    g.name: g
    for g in (
        ListGenerator(),
        GitGenerator(),
        ClustersGenerator(),
        MatrixGenerator(),
        MergeGenerator(),
    )
}

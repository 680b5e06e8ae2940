"""ApplicationSets expanded into the Applications the controller would make, for ``driftguard-cmp diff``.

One module per generator behind the ``Generator`` Protocol (base.py), registered here; adding one
is a new file plus one line below plus its test.
"""

from __future__ import annotations

from cmp_plugin.prcheck.appset.base import AppSetError, Cluster, Context, Generator, Origin
from cmp_plugin.prcheck.appset.clusters import ClustersGenerator
from cmp_plugin.prcheck.appset.git import GitGenerator
from cmp_plugin.prcheck.appset.listgen import ListGenerator
from cmp_plugin.prcheck.appset.matrix import MatrixGenerator
from cmp_plugin.prcheck.appset.merge import MergeGenerator

__all__ = ["GENERATORS", "AppSetError", "Cluster", "Context", "Generator", "Origin"]

GENERATORS: dict[str, Generator] = {
    g.name: g
    for g in (ListGenerator(), GitGenerator(), ClustersGenerator(), MatrixGenerator(), MergeGenerator())
}

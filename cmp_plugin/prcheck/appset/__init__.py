"""ApplicationSets expanded into the Applications the controller would make, for ``driftguard-cmp diff``.

One module per generator behind the ``Generator`` Protocol (base.py), registered in generators.py;
``transform`` dispatches one ``spec.generators[]`` entry, ``applications`` expands a whole
ApplicationSet, ``findings`` explains what changed between two revisions.
"""

from __future__ import annotations

from cmp_plugin.prcheck.appset.base import AppSetError, Cluster, Context, Generator, Origin

__all__ = ["AppSetError", "Cluster", "Context", "Generator", "Origin"]

"""The clusters generator (applicationset/generators/cluster.go) over ``--clusters FILE``.

No cluster API is reachable from a PR check, so the clusters Argo CD knows come from a file:
a YAML list of ``{name, server, project, labels, annotations}``. As in Argo CD, ``selector``
matches the clusters' labels, and the local cluster (``in-cluster``,
https://kubernetes.default.svc) is generated when no selector is set and no listed cluster is it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cmp_plugin.prcheck.appset.base import AppSetError, Cluster, Context, Generated, Nested, Origin, Params
from cmp_plugin.prcheck.appset.template import sanitize_name
from cmp_plugin.prcheck.appset.values import selector_matches
from driftguard.errors import DriftguardError
from driftguard.manifests import safe_load

__all__ = ["ClustersGenerator", "load_clusters"]

CLUSTER_LABEL = "argocd.argoproj.io/secret-type"
IN_CLUSTER = ("in-cluster", "https://kubernetes.default.svc")


def load_clusters(path: Path) -> list[Cluster]:
    try:
        data = safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, DriftguardError, ValueError) as exc:
        raise AppSetError(f"--clusters {path}: {str(exc).splitlines()[0]}") from exc
    if isinstance(data, dict) and "clusters" in data:
        data = data["clusters"]
    if not isinstance(data, list):
        raise AppSetError(
            f"--clusters {path}: expected a list of clusters (name, server, labels, annotations)"
        )
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not item.get("name") or not item.get("server"):
            raise AppSetError(f"--clusters {path}: entry {i} needs a name and a server")
        labels, annotations = item.get("labels") or {}, item.get("annotations") or {}
        if not isinstance(labels, dict) or not isinstance(annotations, dict):
            raise AppSetError(f"--clusters {path}: entry {i}: labels and annotations must be maps")
        out.append(
            Cluster(
                name=str(item["name"]),
                server=str(item["server"]),
                project=str(item.get("project") or ""),
                labels={str(k): str(v) for k, v in labels.items()},
                annotations={str(k): str(v) for k, v in annotations.items()},
            )
        )
    return out


class ClustersGenerator:
    name = "clusters"
    takes_values = True

    def generate(
        self, spec: dict[str, Any], ctx: Context, *, nested: Nested | None = None
    ) -> list[Generated]:
        if ctx.clusters is None:
            raise ctx.fail("a clusters generator needs the clusters Argo CD knows: pass --clusters FILE")
        if spec.get("flatList"):
            raise ctx.fail("clusters.flatList is not supported by driftguard")
        selector = spec.get("selector") or {}
        out = []
        for cluster in ctx.clusters:
            origin = Origin("clusters", f"cluster:{cluster.name}", f"cluster {cluster.name}")
            if selector and not selector_matches(selector, {CLUSTER_LABEL: "cluster", **cluster.labels}, ctx):
                continue
            params: Params = {
                "name": cluster.name,
                "nameNormalized": sanitize_name(cluster.name),
                "server": cluster.server,
                "project": cluster.project,
            }
            labels = {CLUSTER_LABEL: "cluster", **cluster.labels}  # every cluster Secret carries it
            if ctx.go_template:
                meta: Params = {}
                if cluster.annotations:
                    meta["annotations"] = dict(cluster.annotations)
                meta["labels"] = labels
                params["metadata"] = meta
            else:
                params.update({f"metadata.annotations.{k}": v for k, v in cluster.annotations.items()})
                params.update({f"metadata.labels.{k}": v for k, v in labels.items()})
            out.append(Generated(params, (origin,)))
        if not selector and not any(c.server == IN_CLUSTER[1] for c in ctx.clusters):
            name, server = IN_CLUSTER
            params = {"name": name, "nameNormalized": name, "server": server, "project": ""}
            origin = Origin("clusters", f"cluster:{name}", f"cluster {name}")
            out.append(Generated(params, (origin,)))
        return out

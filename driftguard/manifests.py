"""Safe loading of Kubernetes manifest streams, and resource identity as Argo CD sees it.

Everything that reads manifests from outside (a render, a repository file, an API answer)
comes through here, under limits: total size, document count, nesting depth and alias
expansion (a "billion laughs" stream fails in milliseconds instead of eating memory).
A malformed document is reported with its source and line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from driftguard.errors import LimitExceeded, ManifestError

if TYPE_CHECKING:
    import yaml

__all__ = [
    "CLUSTER_SCOPED",
    "DOC_START",
    "Document",
    "Limits",
    "ResourceKey",
    "cluster_scoped_kinds",
    "group_of",
    "load_file",
    "load_stream",
    "resource_key",
    "safe_load",
    "split_documents",
]


@cache
def _loader() -> type[yaml.SafeLoader]:
    """libyaml's safe parser with go-yaml's typing (driftguard/goyaml.py): Argo CD's reading of YAML.

    Built on first use: importing yaml costs ~10 ms that a CMP render read by the fast scanner never needs.
    """
    from driftguard.goyaml import go_loader

    return go_loader()


# A document-start marker: '---' at column 0 followed by whitespace or the end of the line. Matched
# after a newline (the stream gets one prepended) so that the engine jumps between newlines.
DOC_START = re.compile(r"\n---(?=[ \t\r\n]|$)")

# Kinds Kubernetes serves cluster-scoped (group, kind). CRDs in the same stream add theirs.
CLUSTER_SCOPED: frozenset[tuple[str, str]] = frozenset(
    {
        ("", "Namespace"),
        ("", "Node"),
        ("", "PersistentVolume"),
        ("", "ComponentStatus"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("storage.k8s.io", "StorageClass"),
        ("storage.k8s.io", "CSIDriver"),
        ("storage.k8s.io", "CSINode"),
        ("storage.k8s.io", "VolumeAttachment"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("networking.k8s.io", "IngressClass"),
        ("node.k8s.io", "RuntimeClass"),
        ("policy", "PodSecurityPolicy"),
        ("certificates.k8s.io", "CertificateSigningRequest"),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
        ("snapshot.storage.k8s.io", "VolumeSnapshotClass"),
        ("snapshot.storage.k8s.io", "VolumeSnapshotContent"),
        ("cert-manager.io", "ClusterIssuer"),
        ("argoproj.io", "ClusterAnalysisTemplate"),
        ("argoproj.io", "ClusterWorkflowTemplate"),
    }
)


class Limits(NamedTuple):
    """Ceilings for one manifest stream; every field has a default that fits real renders."""

    max_bytes: int = 64 * 1024 * 1024
    """Total size of the stream."""
    max_documents: int = 50_000
    """YAML documents in the stream (List items count once each)."""
    max_depth: int = 128
    """Nesting of mappings and sequences inside one document."""
    max_nodes: int = 5_000_000
    """Mappings, sequences and scalars in the whole stream, aliases expanded."""


DEFAULT_LIMITS = Limits()


class ResourceKey(NamedTuple):
    """A resource's identity the way Argo CD keys it: core group is "", cluster-scoped has no namespace.

    A named tuple: renders key thousands of resources, and tuples are built and hashed fastest.
    """

    group: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        gk = f"{self.kind}.{self.group}" if self.group else self.kind
        return f"{gk} {self.namespace}/{self.name}" if self.namespace else f"{gk} {self.name}"


class Document(NamedTuple):
    """One resource from a stream, with where it came from."""

    obj: dict[str, Any]
    source: str
    line: int
    """1-based line where its document starts in ``source``."""

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def safe_load(text: str) -> Any:
    """One YAML document typed as Argo CD's Go YAML types it (goyaml.py); yaml.YAMLError on bad input."""
    import yaml

    return yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass


def group_of(api_version: str) -> str:
    """The API group of an apiVersion: "apps/v1" -> "apps", "v1" -> ""."""
    return api_version.rpartition("/")[0]


def cluster_scoped_kinds(objs: Iterable[dict[str, Any]]) -> frozenset[tuple[str, str]]:
    """The built-in cluster-scoped kinds plus those declared ``scope: Cluster`` by CRDs in ``objs``."""
    extra = set()
    for obj in objs:
        if obj.get("kind") == "CustomResourceDefinition" and group_of(str(obj.get("apiVersion", ""))) == (
            "apiextensions.k8s.io"
        ):
            spec = obj.get("spec")
            if isinstance(spec, dict) and spec.get("scope") == "Cluster":
                names = spec.get("names")
                if isinstance(names, dict) and isinstance(names.get("kind"), str):
                    extra.add((str(spec.get("group", "")), names["kind"]))
    return CLUSTER_SCOPED | extra if extra else CLUSTER_SCOPED


def resource_key(
    obj: dict[str, Any],
    *,
    default_namespace: str = "",
    cluster_scoped: frozenset[tuple[str, str]] = CLUSTER_SCOPED,
) -> ResourceKey:
    """The ResourceKey of a Kubernetes object; namespaced objects without one get ``default_namespace``."""
    group = group_of(str(obj.get("apiVersion", "")))
    kind = str(obj.get("kind", ""))
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or meta.get("generateName") or "")
    if (group, kind) in cluster_scoped:
        namespace = ""
    else:
        namespace = str(meta.get("namespace") or default_namespace)
    return ResourceKey(group, kind, namespace, name)


def load_file(
    path: str | Path, *, limits: Limits = DEFAULT_LIMITS, require_identity: bool = True
) -> list[Document]:
    """Load one YAML or JSON manifest file (``.json`` may hold one object or an array)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ManifestError(f"cannot read: {exc.strerror}", source=str(path)) from exc
    if size > limits.max_bytes:
        raise LimitExceeded(f"{size} bytes is over the limit of {limits.max_bytes}", source=str(path))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"cannot read: {exc.strerror}", source=str(path)) from exc
    return load_stream(data, source=str(path), limits=limits, require_identity=require_identity)


def load_stream(
    data: str | bytes,
    *,
    source: str = "<input>",
    limits: Limits = DEFAULT_LIMITS,
    require_identity: bool = True,
    first_line: int = 1,
) -> list[Document]:
    """Parse a multi-document YAML (or JSON) stream into resources, flattening lists as Argo CD does.

    Empty documents are skipped. Every document must be a mapping; with ``require_identity``
    each resource must also carry ``apiVersion``, ``kind`` and ``metadata.name`` (or
    ``generateName``). Raises ManifestError (LimitExceeded for limits) naming source and line.
    """
    if len(data) > limits.max_bytes:
        raise LimitExceeded(f"{len(data)} bytes is over the limit of {limits.max_bytes}", source=source)
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ManifestError(f"not UTF-8 text (byte {exc.start})", source=source) from exc
    else:
        text = data
    budget = _Budget(limits, source)
    docs: list[Document] = []
    for line, chunk in split_documents(text, first_line=first_line):
        obj = _parse_chunk(chunk, source, line)
        if obj is None:
            continue
        budget.charge(obj, line)
        for item in _flatten(obj, source, line):
            if require_identity:
                _check_identity(item, source, line)
            docs.append(Document(item, source, line))
            if len(docs) > limits.max_documents:
                raise LimitExceeded(f"more than {limits.max_documents} documents", source=source, line=line)
    return docs


def split_documents(text: str, *, first_line: int = 1) -> Iterator[tuple[int, str]]:
    """Yield (1-based start line, text) for each document of a stream, split at ``---`` lines."""
    starts = [m.start() for m in DOC_START.finditer("\n" + text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    line = first_line
    prev = 0
    for i, start in enumerate(starts):
        line += text.count("\n", prev, start)
        prev = start
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        yield line, text[start:end]


def _parse_chunk(chunk: str, source: str, line: int) -> Any:
    stripped = chunk.lstrip()
    if stripped[:1] in ("{", "["):
        # JSON is the common machine-written case: parse it strictly and fast, fall back to YAML.
        # Numbers as Argo CD ends up with them (goyaml.py): 1.0 is 1, NaN/Infinity are no JSON.
        try:
            return json.loads(
                chunk, parse_float=_json_float, parse_int=_json_int, parse_constant=_no_constant
            )
        except ValueError:
            pass
        except RecursionError as exc:
            raise LimitExceeded("nesting too deep", source=source, line=line) from exc
    import yaml

    try:
        return yaml.load(chunk, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = line + mark.line if mark is not None else line
        problem = exc.problem or exc.context or "invalid YAML"
        if "maximum nesting depth" in str(exc):
            raise LimitExceeded("nesting too deep for the YAML parser", source=source, line=at) from exc
        raise ManifestError(f"invalid YAML: {problem}", source=source, line=at) from exc
    except yaml.YAMLError as exc:
        raise ManifestError(f"invalid YAML: {exc}", source=source, line=line) from exc
    except RecursionError as exc:
        raise LimitExceeded("nesting too deep", source=source, line=line) from exc


def _json_float(text: str) -> Any:
    value = float(text)
    if value.is_integer() and -(1 << 63) <= value < 1 << 63:
        return int(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(text)  # YAML then decides (and refuses it, as Argo CD does)
    return value


def _json_int(text: str) -> Any:
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 63 else float(value)


def _no_constant(text: str) -> Any:
    raise ValueError(text)  # NaN / Infinity are not JSON for Go; YAML reads them as strings


class _Budget:
    """Counts nodes (aliases expanded) and depth across a stream without expanding anything."""

    def __init__(self, limits: Limits, source: str) -> None:
        self.limits = limits
        self.source = source
        self.nodes = 0
        self._memo: dict[int, tuple[int, int]] = {}

    def charge(self, obj: Any, line: int) -> None:
        self._memo.clear()
        self._line = line
        size, _ = self._measure(obj, 1)
        self.nodes += size
        if self.nodes > self.limits.max_nodes:
            raise LimitExceeded(
                f"more than {self.limits.max_nodes} YAML nodes once aliases are expanded (an alias bomb?)",
                source=self.source,
                line=line,
            )

    def _measure(self, node: Any, depth: int) -> tuple[int, int]:
        """(expanded size, height) of ``node``; shared nodes (aliases) are measured once."""
        if depth > self.limits.max_depth:
            raise LimitExceeded(
                f"nesting deeper than {self.limits.max_depth}", source=self.source, line=self._line
            )
        if isinstance(node, dict):
            children: Iterable[Any] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            return 1, 0
        seen = self._memo.get(id(node))
        if seen is not None:
            if depth + seen[1] > self.limits.max_depth:
                raise LimitExceeded(
                    f"nesting deeper than {self.limits.max_depth}", source=self.source, line=self._line
                )
            return seen
        size, height = 1, 0
        for child in children:
            if isinstance(child, dict | list):
                s, h = self._measure(child, depth + 1)
                size += s
                height = max(height, h + 1)
                if size > self.limits.max_nodes:
                    raise LimitExceeded(
                        f"more than {self.limits.max_nodes} YAML nodes once aliases are expanded (an alias bomb?)",
                        source=self.source,
                        line=self._line,
                    )
            else:
                size += 1
                height = max(height, 1)
        self._memo[id(node)] = (size, height)
        return size, height


def _flatten(obj: Any, source: str, line: int) -> Iterator[dict[str, Any]]:
    if isinstance(obj, list):
        # a JSON array of objects (a .json file holding several resources)
        for item in obj:
            yield from _flatten(item, source, line)
        return
    if not isinstance(obj, dict):
        raise ManifestError(
            f"a document must be a mapping (a Kubernetes object), got {_type_name(obj)}",
            source=source,
            line=line,
        )
    # Argo CD's repo-server (reposerver/repository/repository.go, GenerateManifests, v3.5.1) flattens
    # every object for which apimachinery's Unstructured.IsList holds (an ``items`` key whose value
    # is a list: whatever the kind, so a PVC with ``items: []`` becomes nothing) and drops one whose
    # ``items`` is null unless it has ``spec`` or ``status`` (``isNullList``).
    if "items" in obj:
        items = obj["items"]
        if isinstance(items, list):
            for item in items:
                if not isinstance(item, dict):
                    raise ManifestError(
                        f"an item of {obj.get('kind')} is {_type_name(item)}, not a mapping",
                        source=source,
                        line=line,
                    )
                yield item
            return
        if items is None and "spec" not in obj and "status" not in obj:
            return
    yield obj


def _check_identity(obj: dict[str, Any], source: str, line: int) -> None:
    for field in ("apiVersion", "kind"):
        value = obj.get(field)
        if not isinstance(value, str) or not value:
            raise ManifestError(f"resource has no {field}", source=source, line=line)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise ManifestError(f"{obj['kind']} has no metadata mapping", source=source, line=line)
    if not (isinstance(meta.get("name"), str) and meta["name"]) and not (
        isinstance(meta.get("generateName"), str) and meta["generateName"]
    ):
        raise ManifestError(f"{obj['kind']} has no metadata.name", source=source, line=line)
    namespace = meta.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise ManifestError(
            f"{obj['kind']} {meta.get('name')}: metadata.namespace is not a string", source=source, line=line
        )


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )

"""Argo CD's ignoreDifferences, applied exactly as Argo CD applies them.

Rules come from an Application's ``spec.ignoreDifferences[]`` and from argocd-cm (read and merged
by ``driftguard.argocd_cm.rules_from_argocd_cm``: the ``resource.customizations`` block and the
split ``resource.customizations.<type>.<group>_<Kind>`` keys, as Argo CD merges them). A rule matches a resource when its group and kind
glob-match (gobwas globs as Argo CD's util/glob: ``*`` spans dots, ``{a,b}`` alternatives) and its name and namespace, when set, are
equal. ``jsonPointers`` are removed from both sides (a pointer to a missing path is skipped, not an
error); ``jqPathExpressions`` run as ``del(<expr>)`` in a real jq with a timeout (Argo CD's default
1 s), a failing or slow expression is skipped as Argo CD skips it; then empty objects and arrays
are dropped. ``managedFieldsManagers`` are returned for the drift classifier: fields those
managers own are not drift.

argocd-cm carries two more things the comparison needs, which come as rules that ignore nothing
(``purpose`` "config") so that one list still describes everything in force:
``resource.customizations.knownTypeFields.<group>_<Kind>`` (and ``knownTypeFields`` in the older
block; argo-cd util/argo/normalizers/knowntypes_normalizer.go, with its built-in argoproj.io/Rollout
``spec.template.spec`` PodSpec) and ``resource.compareoptions`` (util/settings/settings.go:
``ignoreAggregatedRoles``, ``ignoreResourceStatusField``).
"""

from __future__ import annotations

import copy
import multiprocessing
import threading
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from driftguard import globs
from driftguard.diff import unescape
from driftguard.errors import InputError
from driftguard.normalize import CompareOptions

__all__ = ["IgnoreRule", "IgnoreRules", "JqRunner", "rules_from_application"]

# knowntypes_normalizer.go ensureDefaultCRDsConfigured: unless argocd-cm says otherwise
DEFAULT_KNOWN_TYPES = {("argoproj.io", "Rollout"): (("spec.template.spec", "core/v1/PodSpec"),)}


@dataclass(frozen=True)
class IgnoreRule:
    """One ignoreDifferences entry; ``origin`` says where it came from (for reports)."""

    group: str = ""
    kind: str = ""
    name: str = ""
    namespace: str = ""
    json_pointers: tuple[str, ...] = ()
    jq_path_expressions: tuple[str, ...] = ()
    managed_fields_managers: tuple[str, ...] = ()
    origin: str = "application"
    known_type_fields: tuple[tuple[str, str], ...] = ()
    """argocd-cm knownTypeFields: (field path, Kubernetes type) pairs for this group/kind."""
    compare_options: CompareOptions | None = None
    """argocd-cm resource.compareoptions, carried by a rule that matches nothing."""

    @property
    def purpose(self) -> str:
        """ "ignore" for an ignoreDifferences entry, "config" for knownTypeFields/compareoptions."""
        return "config" if self.known_type_fields or self.compare_options is not None else "ignore"

    def matches(self, group: str, kind: str, name: str, namespace: str) -> bool:
        """Argo CD's matching: glob on group and kind, exact name/namespace when set."""
        return (
            _glob(self.group, group)
            and _glob(self.kind, kind)
            and (not self.name or self.name == name)
            and (not self.namespace or self.namespace == namespace)
        )

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, origin: str) -> IgnoreRule:
        """Build a rule from an ignoreDifferences entry, refusing wrong types with a clear error."""
        if not isinstance(raw, Mapping):
            raise InputError(
                f"{origin}: an ignoreDifferences entry must be a mapping, got {type(raw).__name__}"
            )

        def strings(name: str) -> tuple[str, ...]:
            value = raw.get(name) or []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InputError(f"{origin}: {name} must be a list of strings")
            return tuple(value)

        pointers = strings("jsonPointers")
        for p in pointers:
            if p and not p.startswith("/"):
                raise InputError(f"{origin}: jsonPointer {p!r} must start with '/'")
        return cls(
            group=str(raw.get("group") or ""),
            kind=str(raw.get("kind") or ""),
            name=str(raw.get("name") or ""),
            namespace=str(raw.get("namespace") or ""),
            json_pointers=pointers,
            jq_path_expressions=strings("jqPathExpressions"),
            managed_fields_managers=strings("managedFieldsManagers"),
            origin=origin,
        )


def _glob(pattern: str, value: str) -> bool:
    # util/argo/diff/ignore.go and normalizers/diff_normalizer.go: glob.Match (gobwas, no separators)
    return globs.match(pattern, value)


def rules_from_application(app: Mapping[str, Any]) -> list[IgnoreRule]:
    """The ``spec.ignoreDifferences`` of an Application manifest."""
    spec = app.get("spec") or {}
    entries = spec.get("ignoreDifferences") or [] if isinstance(spec, Mapping) else []
    if not isinstance(entries, list):
        raise InputError("spec.ignoreDifferences must be a list")
    name = (app.get("metadata") or {}).get("name", "")
    return [
        IgnoreRule.from_dict(e, origin=f"Application {name} ignoreDifferences[{i}]")
        for i, e in enumerate(entries)
    ]


# --- jq, isolated so that a runaway expression can be killed -------------------------------------

_compiled: dict[str, Any] = {}


def _jq_delete(expression: str, value: Any) -> Any:
    import jq  # imported in the worker, and only when a jq rule exists

    program = _compiled.get(expression)
    if program is None:
        program = _compiled[expression] = jq.compile(f"del({expression})")
    results = program.input_value(value).all()
    if len(results) != 1:
        raise ValueError(f"jq returned {len(results)} values")
    return results[0]


def _jq_check(expression: str) -> None:
    import jq

    jq.compile(f"del({expression})")


class JqRunner:
    """Runs jq deletions in a child process with a deadline; a timed-out child is replaced."""

    def __init__(self, timeout: float = 1.0) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("forkserver")
            )
        return self._pool

    def delete(self, expression: str, value: Any) -> Any | None:
        """``del(expression)`` applied to value, or None when jq failed or timed out (Argo skips it)."""
        with self._lock:
            future = self._executor().submit(_jq_delete, expression, value)
            try:
                return future.result(timeout=self.timeout)
            except FutureTimeout:
                self._kill()
                return None
            except Exception:  # a jq runtime error: skipped, as Argo CD skips it
                return None

    def _kill(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.kill()
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the child process."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None


@dataclass
class IgnoreRules:
    """All rules in force for one Application, ready to normalize resources."""

    rules: list[IgnoreRule] = field(default_factory=list)
    jq_timeout: float = 1.0
    _runner: JqRunner | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for rule in self.rules:
            for expression in rule.jq_path_expressions:
                try:
                    _jq_check(expression)
                except ValueError as exc:
                    raise InputError(
                        f"{rule.origin}: jqPathExpression {expression!r} does not compile: {exc}"
                    ) from exc

    def matching(self, group: str, kind: str, name: str, namespace: str) -> list[IgnoreRule]:
        """The ignoreDifferences rules for this resource (config-only rules are not among them)."""
        return [r for r in self.rules if r.purpose == "ignore" and r.matches(group, kind, name, namespace)]

    @property
    def compare_options(self) -> CompareOptions:
        """argocd-cm resource.compareoptions in force (the last one given), else Argo's defaults."""
        found = [r.compare_options for r in self.rules if r.compare_options is not None]
        return found[-1] if found else CompareOptions()

    def known_types(self, group: str, kind: str) -> tuple[tuple[str, str], ...]:
        """knownTypeFields for this group/kind (exact match, as Argo keys them by GroupKind)."""
        mine = [r for r in self.rules if r.known_type_fields and r.group == group and r.kind == kind]
        if not mine:
            return DEFAULT_KNOWN_TYPES.get((group, kind), ())
        return tuple(f for r in mine for f in r.known_type_fields)

    def trusted_managers(self, group: str, kind: str, name: str, namespace: str) -> dict[str, str]:
        """managedFieldsManagers that apply to this resource -> the rule origin that named them."""
        out: dict[str, str] = {}
        for rule in self.matching(group, kind, name, namespace):
            for manager in rule.managed_fields_managers:
                out.setdefault(manager, rule.origin)
        return out

    def normalize(self, obj: dict[str, Any], rules: list[IgnoreRule]) -> dict[str, Any]:
        """A copy of ``obj`` with every pointer and jq path of ``rules`` removed, empties dropped."""
        if not any(r.json_pointers or r.jq_path_expressions for r in rules):
            return obj
        out = copy.deepcopy(obj)
        for rule in rules:
            for ptr in rule.json_pointers:
                _remove_pointer(out, ptr)
            for expression in rule.jq_path_expressions:
                result = self._jq().delete(expression, out)
                if isinstance(result, dict):
                    out = result
        _remove_empty(out)
        return out

    def _jq(self) -> JqRunner:
        if self._runner is None:
            self._runner = JqRunner(self.jq_timeout)
        return self._runner

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()


def _remove_pointer(obj: Any, ptr: str) -> None:
    """RFC 6901 remove; a missing path is skipped, as Argo CD skips it."""
    if not ptr:
        return
    tokens = [unescape(t) for t in ptr.split("/")[1:]]
    node = obj
    for token in tokens[:-1]:
        node = _child(node, token)
        if node is None:
            return
    last = tokens[-1]
    if isinstance(node, dict):
        node.pop(last, None)
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        del node[int(last)]


def _child(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        return node.get(token)
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    return None


def _remove_empty(obj: dict[str, Any]) -> None:
    """Argo CD's removeEmptyObjects: drop empty maps and arrays left behind, recursively."""
    for key in list(obj):
        value = obj[key]
        if isinstance(value, dict):
            _remove_empty(value)
            if not value:
                del obj[key]
        elif isinstance(value, list):
            cleaned = []
            for item in value:
                if isinstance(item, dict):
                    _remove_empty(item)
                    if item:
                        cleaned.append(item)
                else:
                    cleaned.append(item)
            if len(cleaned) != len(value):
                obj[key] = cleaned
            if not cleaned:
                del obj[key]

"""Argo CD's normalizations, applied to both sides before anything is compared.

Each rule follows the Argo CD v3.5.1 source named beside it; ``normalize`` runs them in Argo's
order (gitops-engine ``pkg/diff/diff.go``: ``Diff`` -> ``remarshal`` -> ``Normalize`` ->
``ThreeWayDiff``). What survives is what Argo CD itself would compare; driftguard's classes
apply only to that.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from driftguard.errors import InputError
from driftguard.k8s_fields import OMITEMPTY_ZERO, QUANTITIES
from driftguard.windows import parse_duration

__all__ = [
    "BUILTIN_GROUPS",
    "CompareOptions",
    "canonical_duration",
    "canonical_quantity",
    "normalize",
    "remarshal_view",
    "strip_identity",
]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Set by the API server, never by Git: not part of what Argo CD's patch would change.
SERVER_METADATA = ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink")
_RULE_LISTS = ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs")
# field names that can be touched at all, so that most differences are passed over at once
_ZERO_KEYS = frozenset(f.split(":", 1)[0] for _, f in OMITEMPTY_ZERO)
_QUANTITY_KEYS = frozenset(k for _, k in QUANTITIES)
_QUANTITY_MAPS = frozenset(k for (_, k), shape in QUANTITIES.items() if shape == "map")

# Groups whose kinds client-go's scheme knows, i.e. that gitops-engine's remarshal re-encodes
# through their Go structs (driftguard/k8s_fields.py is generated from these groups' types.go).
BUILTIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "autoscaling",
        "networking.k8s.io",
        "rbac.authorization.k8s.io",
        "policy",
        "storage.k8s.io",
        "scheduling.k8s.io",
        "discovery.k8s.io",
    }
)


@dataclass(frozen=True)
class CompareOptions:
    """argocd-cm ``resource.compareoptions`` (util/settings/settings.go: ArgoCDDiffOptions)."""

    ignore_aggregated_roles: bool = False
    """``ignoreAggregatedRoles``: an aggregated ClusterRole's rules are the aggregator's business."""
    ignore_resource_status_field: str = "all"
    """``ignoreResourceStatusField``: all (Argo's default), crd, or none."""

    def ignores_status(self, group: str, kind: str) -> bool:
        """settings.go GetResourceOverrides: a ``/status`` jsonPointer for */*, for CRDs, or none."""
        mode = self.ignore_resource_status_field
        if mode in ("none", "off", "false"):
            return False
        if mode == "crd":
            return group == "apiextensions.k8s.io" and kind == "CustomResourceDefinition"
        return True  # "", all, and unrecognised values (settings.go warns and ignores for all)


def normalize(
    obj: dict[str, Any],
    group: str,
    kind: str,
    *,
    options: CompareOptions,
    known_types: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """A normalized copy of ``obj``; parts it does not change are shared, never modified.

    gitops-engine diff.go ``Normalize`` and the ignore/knownTypes normalizers. The remarshal of
    built-in kinds is applied to the differences instead (``remarshal_view``), which is the same
    answer for far less work: it only ever removes zeros and rewrites quantities.
    """
    out = dict(obj)
    if options.ignores_status(group, kind):
        out.pop("status", None)
    if isinstance(out.get("metadata"), dict):
        out["metadata"] = dict(out["metadata"])
        strip_identity(out)
    if group == "" and kind == "Secret":
        _secret(out)
    elif group == "rbac.authorization.k8s.io" and kind in ("Role", "ClusterRole"):
        _role(out, options)
    elif group == "" and kind == "Endpoints":
        _endpoints(out)
    if known_types:
        for top in {path.split(".", 1)[0] for path, _ in known_types}:
            if top in out and top != "metadata":
                out[top] = json.loads(json.dumps(out[top], default=str))  # rewritten in place below
        for path, type_name in known_types:
            _known_type(out, path.split("."), type_name)
    return out


def remarshal_view(
    segments: tuple[Any, ...], op: str, old: Any, new: Any, kind: str
) -> tuple[str, Any, Any] | None:
    """A difference of a built-in object as it looks once gitops-engine's remarshal (diff.go) has
    run on both sides: None when it vanishes, else its (op, old, new).

    Go writes no ``omitempty`` zero of a non-pointer field (so a zero on one side is the field
    being absent) and writes every ``resource.Quantity`` canonically (k8s_fields.py, generated
    from k8s.io/api).
    """
    unchanged = (op, old, new)
    if not segments or not isinstance(segments[-1], str):
        return unchanged
    key = segments[-1]
    zero_key = key in _ZERO_KEYS
    old_zero = _zero_type(old) if zero_key and op != "add" else None
    new_zero = _zero_type(new) if zero_key and op != "remove" else None
    scalars = (
        op == "replace"
        and (key in _QUANTITY_KEYS or (len(segments) >= 2 and segments[-2] in _QUANTITY_MAPS))
        and isinstance(old, str | int | float)
        and isinstance(new, str | int | float)
        and not isinstance(old, bool)
        and not isinstance(new, bool)
    )
    if old_zero is None and new_zero is None and not scalars:
        return unchanged  # the common case: nothing remarshal could touch
    parent = _parent_name(segments, len(segments) - 1, kind)
    if parent is None:
        return unchanged
    old_dropped = old_zero is not None and (parent, f"{key}:{old_zero}") in OMITEMPTY_ZERO
    new_dropped = new_zero is not None and (parent, f"{key}:{new_zero}") in OMITEMPTY_ZERO
    if op == "add":
        return None if new_dropped else unchanged
    if op == "remove":
        return None if old_dropped else unchanged
    if op != "replace":
        return unchanged
    if old_dropped:
        return None if new_dropped else ("add", None, new)
    if new_dropped:
        return ("remove", old, None)
    if scalars:
        shape = QUANTITIES.get((parent, key))
        if shape is None and len(segments) >= 2 and isinstance(segments[-2], str):
            grand = _parent_name(segments, len(segments) - 2, kind)
            shape = "entry" if grand is not None and QUANTITIES.get((grand, segments[-2])) == "map" else None
        if shape in ("value", "entry") and canonical_quantity(old) == canonical_quantity(new):
            return None
    return unchanged


def _parent_name(segments: tuple[Any, ...], i: int, kind: str) -> str | None:
    """The field name the struct holding ``segments[i]`` sits under ("^Kind" at the top)."""
    j = i - 1
    if j < 0:
        return "^" + kind
    if isinstance(segments[j], str):
        return str(segments[j])
    return str(segments[j - 1]) if j >= 1 and isinstance(segments[j - 1], str) else None


def strip_identity(obj: dict[str, Any]) -> None:
    """Metadata Argo CD's three-way patch never changes, removed (``obj["metadata"]`` is the
    caller's own copy).

    diff.go ThreeWayDiff/removeNamespaceAnnotation: ``metadata.namespace`` and an empty
    annotations map go (the namespace is identity: it decides pairing, not the diff);
    diff.go Normalize: ``creationTimestamp``; server-set metadata and the last-applied annotation
    are never in Git, so the patch never touches them.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return
    for k in (*SERVER_METADATA, "namespace"):
        meta.pop(k, None)
    ann = meta.get("annotations")
    if isinstance(ann, dict) and LAST_APPLIED in ann:
        ann = meta["annotations"] = {k: v for k, v in ann.items() if k != LAST_APPLIED}
    if (ann is None and "annotations" in meta) or (isinstance(ann, dict) and not ann):
        del meta["annotations"]
    if "labels" in meta and meta["labels"] is None:
        del meta["labels"]


def _zero_type(value: Any) -> str | None:
    if value is False:
        return "bool"
    if value == "" and isinstance(value, str):
        return "string"
    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return "int"
    if value == [] and isinstance(value, list):
        return "list"
    if value == {} and isinstance(value, dict):
        return "map"
    return None


def _drop_zero(node: dict[str, Any], parent: str) -> None:
    """Go's encoding/json under the k8s structs: a non-pointer ``omitempty`` zero is not written,
    and a ``resource.Quantity`` is written in its canonical form."""
    for key in list(node):
        value = node[key]
        zero = _zero_type(value)
        shape = QUANTITIES.get((parent, key))
        if zero is not None and (parent, f"{key}:{zero}") in OMITEMPTY_ZERO:
            del node[key]
        elif shape == "value" and isinstance(value, str | int | float) and not isinstance(value, bool):
            node[key] = canonical_quantity(value)
        elif shape == "map" and isinstance(value, dict):
            for name, q in value.items():
                if isinstance(q, str | int | float) and not isinstance(q, bool):
                    value[name] = canonical_quantity(q)
        elif isinstance(value, dict):
            _drop_zero(value, key)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _drop_zero(item, key)


def _secret(obj: dict[str, Any]) -> None:
    """diff.go NormalizeSecret: stringData folds into data (base64); a null value becomes ""."""
    string_data = obj.get("stringData")
    if isinstance(string_data, dict):
        data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
        data = dict(data or {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(v.encode()).decode() if isinstance(v, str) else v
        obj["data"] = data
        del obj["stringData"]
    data = obj.get("data")
    if isinstance(data, dict) and any(v is None for v in data.values()):
        data = obj["data"] = dict(data)
        for k, v in data.items():
            if v is None:  # argo-cd#943: nil and empty are the same secret value
                data[k] = ""


def _role(obj: dict[str, Any], options: CompareOptions) -> None:
    """diff.go normalizeRole: empty rules are nil; with ignoreAggregatedRoles an aggregated role's
    rules are nil (the aggregation controller writes them)."""
    if options.ignore_aggregated_roles and isinstance(obj.get("aggregationRule"), dict):
        obj.pop("rules", None)
    rules = obj.get("rules")
    if isinstance(rules, list):
        # Go's []string omitempty: an empty list inside a rule is not written (the existing rule)
        obj["rules"] = [
            {k: v for k, v in r.items() if not (k in _RULE_LISTS and not v)} if isinstance(r, dict) else r
            for r in rules
        ]
        if not obj["rules"]:
            del obj["rules"]
    elif "rules" in obj and rules is None:
        del obj["rules"]


def _endpoints(obj: dict[str, Any]) -> None:
    """diff.go normalizeEndpoint: a port without protocol is TCP, then subsets are sorted."""
    subsets = obj.get("subsets")
    if not isinstance(subsets, list):
        return
    out = []
    for subset in subsets:
        if not isinstance(subset, dict):
            out.append(subset)
            continue
        s = dict(subset)
        if isinstance(s.get("ports"), list):
            s["ports"] = sorted(
                (
                    {**p, "protocol": p.get("protocol") or "TCP"} if isinstance(p, dict) else p
                    for p in s["ports"]
                ),
                key=_stable,
            )
        for name in ("addresses", "notReadyAddresses"):
            if isinstance(s.get(name), list):
                s[name] = sorted(s[name], key=_stable)
        out.append(s)
    obj["subsets"] = sorted(out, key=_stable)


def _stable(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


# --- argocd-cm knownTypeFields (util/argo/normalizers/knowntypes_normalizer.go) ----------------


def _known_type(obj: Any, path: list[str], type_name: str) -> None:
    """Re-format the field at ``path`` as its Kubernetes type would; lists on the way are walked."""
    for i in range(len(path)):
        node = _get(obj, path[: i + 1])
        if isinstance(node, list):
            rest = path[i + 1 :]
            for j, item in enumerate(node):
                if not isinstance(item, dict):
                    continue
                if rest:
                    _known_type(item, rest, type_name)
                else:
                    node[j] = _retype(item, type_name)
            return
    parent = _get(obj, path[:-1]) if len(path) > 1 else obj
    if isinstance(parent, dict) and path and path[-1] in parent:
        parent[path[-1]] = _retype(parent[path[-1]], type_name)


def _get(obj: Any, path: list[str]) -> Any:
    node = obj
    for p in path:
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


def _retype(value: Any, type_name: str) -> Any:
    if type_name == "core/Quantity":
        return canonical_quantity(value) if isinstance(value, str | int | float) else value
    if type_name == "meta/v1/Duration":
        return canonical_duration(value) if isinstance(value, str) else value
    if type_name.startswith("core/v1/") and isinstance(value, dict):
        out = json.loads(json.dumps(value))
        _drop_zero(out, "@" + type_name.rsplit("/", 1)[1])
        return out
    return value


_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_IN = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def canonical_quantity(value: str | int | float) -> str | int | float:
    """k8s resource.Quantity's canonical string ("2000m" -> "2", "1.25G" -> "1250M"); unparsable
    input is returned as is (gitops-engine keeps an invalid quantity, TestRemarshalResources)."""
    text = str(value).strip()
    binary = False
    try:
        if text[-2:] in _BINARY:
            amount, binary = Decimal(text[:-2]) * (Decimal(2) ** _BINARY[text[-2:]]), True
        elif text[-1:] in _SUFFIX_IN:
            amount = Decimal(text[:-1]).scaleb(_SUFFIX_IN[text[-1:]])
        else:
            amount = Decimal(text)
    except (InvalidOperation, IndexError):
        return value
    if not amount.is_finite():
        return value
    if amount != amount.quantize(Decimal("1e-9"), rounding="ROUND_CEILING"):
        amount = amount.quantize(Decimal("1e-9"), rounding="ROUND_CEILING")  # Quantity keeps nano precision
    if binary and amount == amount.to_integral_value() and abs(amount) >= 1024:
        n = int(amount)
        for suffix, power in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
            if n % (1 << power) == 0:
                return f"{n >> power}{suffix}"
        return str(n)
    if amount == 0:
        return "0"
    for exp in sorted(_DECIMAL, reverse=True):
        mantissa = amount.scaleb(-exp)
        if mantissa == mantissa.to_integral_value():
            return f"{int(mantissa)}{_DECIMAL[exp]}"
    return f"{int(amount.scaleb(9).to_integral_value(rounding='ROUND_CEILING'))}n"


def canonical_duration(text: str) -> str:
    """Go's ``time.Duration.String()`` of a parsable duration ("8760h" -> "8760h0m0s")."""
    try:
        td = parse_duration(text)
    except InputError:
        return text
    nanos = round(td.total_seconds() * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("\u00b5s", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _frac(nanos, size) + unit
    hours, rem = divmod(nanos, 3_600_000_000_000)
    minutes, rem = divmod(rem, 60_000_000_000)
    seconds = _frac(rem, 1_000_000_000) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return sign + seconds


def _frac(n: int, size: int) -> str:
    whole, part = divmod(n, size)
    if not part:
        return str(whole)
    digits = len(str(size)) - 1
    return f"{whole}.{str(part).rjust(digits, '0').rstrip('0')}"

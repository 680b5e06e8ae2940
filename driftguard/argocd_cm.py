"""The argocd-cm a component is given, read once for all of them: a file or a mounted directory.

Argo CD reads the ConfigMap's ``data`` (argo-cd v3.5.1 util/settings/settings.go:
``GetResourceOverrides`` and ``GetResourceCompareOptions`` read ``argoCDCM.Data``); driftguard
reads the same ``data`` from what the platform mounts:

- a YAML or JSON file holding the ConfigMap (or only its ``data``): exactly one document;
- the ConfigMap mounted as a volume, a directory with a file per key. The kubelet's own entries
  there (``..data``, ``..<timestamp>``) start with ``..``, which no ConfigMap key may
  (k8s.io/apimachinery validation ``IsConfigMapKey``), so those are skipped and every other file
  is a key, as in Argo CD's ``Data``.

Then the resource overrides are merged as Argo CD merges them (``resource_overrides``; argo-cd
v3.5.1 util/settings/settings.go ``GetResourceOverrides``, ``appendResourceOverridesFromSplitKeys``,
``convertToOverrideKey``):

- the ``resource.customizations`` block first, one override per ``<group>/<Kind>`` key;
- then every key starting with ``resource.customizations`` that splits on its first three dots
  into four parts, ``resource.<customizations...>.<type>.<group_kind>``. ``<group_kind>`` is
  ``<group>_<Kind>`` (``<group>/<Kind>``; an empty group gives ``/<Kind>``), or ``<Kind>`` alone
  (the key ``<Kind>``, which is not the same key as ``/<Kind>``), ``all`` is ``*/*``; anything else
  (empty, two underscores) is an error. A split key REPLACES one field of that override, never
  appends: ``health``, ``useOpenLibs`` (Go's ``strconv.ParseBool``), ``actions``,
  ``ignoreDifferences`` and ``ignoreResourceUpdates`` (the whole jsonPointers /
  jqPathExpressions / managedFieldsManagers set, even an empty one) and ``knownTypeFields``; any
  other type is an error. Two keys setting one field of one override (``resource.customizationsX``
  also has the prefix) are refused: Go walks the map in random order, so Argo CD's pick varies.

Rules come from the merged overrides (util/argo/normalizers: an override key is ``<group>/<Kind>``
or ``<Kind>``, more slashes match nothing), plus ``resource.compareoptions``. Every failure of the
loader is a ``ConfigError`` naming the setting that gave the path (an environment variable or a flag).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from driftguard.errors import ConfigError, DriftguardError, InputError
from driftguard.ignore import IgnoreRule
from driftguard.manifests import load_file
from driftguard.normalize import CompareOptions

__all__ = [
    "SETTING",
    "ResourceOverride",
    "group_kind_of",
    "load_argocd_cm",
    "override_key",
    "resource_overrides",
    "rules_from_argocd_cm",
    "system_rules_from_file",
]

SETTING = "DRIFTGUARD_ARGOCD_CM_FILE"
"""The variable the notifier and the analysis provider read the path from."""
_KUBELET = ".."
"""The prefix of the kubelet's own entries in a mounted ConfigMap (no key may start with it)."""
CUSTOMIZATIONS = "resource.customizations"
COMPARE_OPTIONS = "resource.compareoptions"
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
"""What Go's ``strconv.ParseBool`` accepts (settings.go reads ``useOpenLibs`` with it)."""

IgnoreDiff = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
"""An ``OverrideIgnoreDiff``: (jsonPointers, jqPathExpressions, managedFieldsManagers)."""


@dataclass(frozen=True)
class ResourceOverride:
    """One entry of Argo CD's ``map[string]ResourceOverride`` (v1alpha1 types.go), after the merge.

    ``ignore_differences`` and ``known_type_fields`` are the rules driftguard applies (None: the
    field is Go's zero value); the other fields are kept so that the merge is Argo CD's whole merge
    (and its errors, such as a ``useOpenLibs`` that is no boolean, are ours).
    """

    health_lua: str = ""
    use_open_libs: bool = False
    actions: str = ""
    ignore_differences: IgnoreRule | None = None
    ignore_resource_updates: IgnoreDiff = ((), (), ())
    known_type_fields: IgnoreRule | None = None


def load_argocd_cm(path: str | Path, *, setting: str = SETTING) -> dict[str, Any]:
    """The mapping ``rules_from_argocd_cm`` reads: the whole ConfigMap from a file, or its keys from a directory."""
    where = Path(path)
    try:
        if where.is_dir():
            return {
                f.name: f.read_text()
                for f in sorted(where.iterdir())
                if not f.name.startswith(_KUBELET) and f.is_file()
            }
        if not where.is_file():
            raise ConfigError(setting, f"{path} does not exist")
        docs = load_file(where, require_identity=False)
        if len(docs) != 1:
            raise ConfigError(setting, f"{path}: expected one ConfigMap, found {len(docs)} documents")
        return docs[0].obj
    except ConfigError:
        raise
    except (DriftguardError, ValueError, OSError) as exc:
        raise ConfigError(setting, f"{path}: {exc}") from exc


def system_rules_from_file(path: str | Path, *, setting: str = SETTING) -> list[IgnoreRule]:
    """argocd-cm's ignore rules (and knownTypeFields, compareoptions); none when ``path`` is empty."""
    if path == "":
        return []
    data = load_argocd_cm(path, setting=setting)
    try:
        return rules_from_argocd_cm(data)
    except (DriftguardError, ValueError) as exc:
        raise ConfigError(setting, f"{path}: {exc}") from exc


# --- the merge: argo-cd v3.5.1 util/settings/settings.go ------------------------------------------


def override_key(group_kind: str) -> str:
    """A split key's ``<group_kind>`` as an override key (``convertToOverrideKey``, then ``all``)."""
    parts = group_kind.split("_")
    if len(parts) == 2:
        return f"{parts[0]}/{parts[1]}"
    if len(parts) != 1 or group_kind == "":
        raise InputError(
            "group kind should be in format `resource.customizations.<type>.<group_kind>` or "
            f"`resource.customizations.<type>.<kind>`, got group kind: {group_kind!r}"
        )
    return "*/*" if group_kind == "all" else group_kind


def group_kind_of(key: str) -> tuple[str, str] | None:
    """An override key's (group, kind) as the normalizers read it (util/argo/normalizers/util.go
    ``getGroupKindForOverrideKey``): ``<group>/<Kind>`` or ``<Kind>``; None for more slashes, which
    Argo CD only logs, leaving a group and kind that match no resource."""
    parts = key.split("/")
    if len(parts) > 2:
        return None
    return (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])


def resource_overrides(data: Mapping[str, Any]) -> dict[str, ResourceOverride]:
    """argocd-cm's resource overrides merged as ``GetResourceOverrides`` merges them (before the
    status rule of ``resource.compareoptions``, which driftguard applies in normalize.py)."""
    data = _cm_data(data)
    overrides: dict[str, ResourceOverride] = {}
    block = data.get(CUSTOMIZATIONS)
    if block not in (None, ""):
        parsed = _yaml(block, f"argocd-cm {CUSTOMIZATIONS}") or {}
        if not isinstance(parsed, Mapping):
            raise InputError(f"argocd-cm {CUSTOMIZATIONS}: must be a mapping of <group>/<Kind> to overrides")
        for gk, raw in parsed.items():
            overrides[str(gk)] = _block_override(str(gk), raw)
    setters: dict[tuple[str, str], str] = {}
    for key in sorted(data):
        if not key.startswith(CUSTOMIZATIONS):
            continue
        parts = key.split(".", 3)
        if len(parts) < 4:
            continue
        origin = f"argocd-cm {key}"
        try:
            okey = override_key(parts[3])
        except InputError as exc:
            raise InputError(f"{origin}: {exc}") from exc
        kind = parts[2]
        if kind not in _SPLIT_FIELDS:
            raise InputError(f"{origin}: resource customization type {kind!r} not supported")
        earlier = setters.setdefault((okey, kind), key)
        if earlier != key:
            raise InputError(
                f"argocd-cm keys {earlier!r} and {key!r} both set {kind} of {okey!r}; Argo CD "
                "applies them in random order: keep one"
            )
        field = _SPLIT_FIELDS[kind]
        value = _split_value(kind, data[key], okey, origin)
        overrides[okey] = replace(overrides.get(okey, ResourceOverride()), **{field: value})
    return overrides


_SPLIT_FIELDS = {
    "health": "health_lua",
    "useOpenLibs": "use_open_libs",
    "actions": "actions",
    "ignoreDifferences": "ignore_differences",
    "ignoreResourceUpdates": "ignore_resource_updates",
    "knownTypeFields": "known_type_fields",
}
"""settings.go's ``customizationType`` switch: the one field each split key replaces."""


def _split_value(kind: str, value: Any, okey: str, origin: str) -> Any:
    text = "" if value is None else value
    if kind in ("health", "actions"):
        return str(text)
    if kind == "useOpenLibs":
        if str(text) in _GO_TRUE:
            return True
        if str(text) in _GO_FALSE:
            return False
        raise InputError(f"{origin}: {str(text)!r} is not a boolean (Go's strconv.ParseBool)")
    group_kind = group_kind_of(okey) or ("", "")
    if kind == "ignoreDifferences":
        return _ignore_rule(text, *group_kind, origin=origin)
    if kind == "ignoreResourceUpdates":
        return _ignore_diff(text, origin)
    return _known_types(text, *group_kind, origin=origin)


def _block_override(gk: str, raw: Any) -> ResourceOverride:
    # types.go rawResourceOverride: health.lua, health.lua.useOpenLibs, actions, ignoreDifferences
    # and ignoreResourceUpdates (YAML in a string), knownTypeFields (a list)
    origin = f"argocd-cm {CUSTOMIZATIONS} {gk}"
    if raw is None:
        return ResourceOverride()
    if not isinstance(raw, Mapping):
        raise InputError(f"{origin}: must be a mapping")
    group_kind = group_kind_of(gk) or ("", "")
    diff = raw.get("ignoreDifferences")
    known = raw.get("knownTypeFields")
    return ResourceOverride(
        health_lua=str(raw.get("health.lua") or ""),
        use_open_libs=raw.get("health.lua.useOpenLibs") is True,
        actions=str(raw.get("actions") or ""),
        ignore_differences=None if diff is None else _ignore_rule(diff, *group_kind, origin=origin),
        ignore_resource_updates=_ignore_diff(raw.get("ignoreResourceUpdates"), origin),
        known_type_fields=None if known is None else _known_types(known, *group_kind, origin=origin),
    )


def rules_from_argocd_cm(data: Mapping[str, Any]) -> list[IgnoreRule]:
    """System-level rules from argocd-cm ``data`` (or the whole ConfigMap): each merged override's
    ignoreDifferences and knownTypeFields, and ``resource.compareoptions``."""
    data = _cm_data(data)
    rules: list[IgnoreRule] = []
    if COMPARE_OPTIONS in data:
        rules.append(_compare_options(data[COMPARE_OPTIONS]))
    for key, override in sorted(resource_overrides(data).items()):
        if group_kind_of(key) is None:
            continue
        diff = override.ignore_differences
        if diff is not None and (
            diff.json_pointers or diff.jq_path_expressions or diff.managed_fields_managers
        ):
            rules.append(diff)
        if override.known_type_fields is not None and override.known_type_fields.known_type_fields:
            rules.append(override.known_type_fields)
    return rules


def _cm_data(data: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = data.get("data")
    return inner if isinstance(inner, Mapping) else data


def _compare_options(value: Any) -> IgnoreRule:
    origin = f"argocd-cm {COMPARE_OPTIONS}"
    raw = _yaml(value, origin) or {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{origin}: must be a mapping")
    status = raw.get("ignoreResourceStatusField", "all")
    # YAML reads an unquoted off/false as a boolean; settings.go accepts both spellings
    status = "none" if status is False else str(status or "all")
    return IgnoreRule(
        group="*",
        kind="*",
        origin=origin,
        compare_options=CompareOptions(
            ignore_aggregated_roles=bool(raw.get("ignoreAggregatedRoles", False)),
            ignore_resource_status_field=status,
        ),
    )


def _known_types(value: Any, group: str, kind: str, *, origin: str) -> IgnoreRule:
    raw = _yaml(value, origin) or []
    if not isinstance(raw, list):
        raise InputError(f"{origin}: knownTypeFields must be a list of {{field, type}}")
    fields = []
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("field"), str):
            raise InputError(f"{origin}: each knownTypeFields entry needs a field and a type")
        fields.append((item["field"], str(item.get("type") or "")))
    return IgnoreRule(group=group, kind=kind, origin=origin, known_type_fields=tuple(fields))


def _yaml(value: Any, origin: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise InputError(f"{origin}: invalid YAML: {exc}") from exc


def _ignore_rule(value: Any, group: str, kind: str, *, origin: str) -> IgnoreRule:
    raw = _yaml(value, origin) or {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{origin}: must be a mapping")
    return IgnoreRule.from_dict({**raw, "group": group, "kind": kind}, origin=origin)


def _ignore_diff(value: Any, origin: str) -> IgnoreDiff:
    # ignoreResourceUpdates: read for the merge only (driftguard does not act on it, so its
    # pointers are not checked as ignoreDifferences' are)
    raw = _yaml(value, origin) or {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{origin}: must be a mapping")

    def strings(name: str) -> tuple[str, ...]:
        found = raw.get(name) or []
        if not isinstance(found, list) or not all(isinstance(v, str) for v in found):
            raise InputError(f"{origin}: {name} must be a list of strings")
        return tuple(found)

    return (strings("jsonPointers"), strings("jqPathExpressions"), strings("managedFieldsManagers"))

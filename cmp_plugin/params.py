"""Every CMP parameter, defined once.

The Argo CD parameter announcements (``driftguard-cmp parameters``), the generated ``plugin.yaml``,
the reference page ``docs/cmp-parameters.md`` and the parsing of ``ARGOCD_APP_PARAMETERS`` /
``PARAM_*`` / ``ARGOCD_ENV_DRIFTGUARD_*`` all come from ``PARAMETERS``; a test fails when the
committed files drift from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from math import isfinite
from typing import Any, NamedTuple

from driftguard.errors import InputError

__all__ = ["PARAMETERS", "Param", "by_name", "env_name", "not_applying", "param_env_prefix"]

STRING, ARRAY, MAP = "string", "array", "map"
_NOT_IN_ENV_NAME = re.compile(r"[^A-Z0-9]")  # compiled at import: in the preload server, not per render


class Param(NamedTuple):
    """One parameter: its name (the Application's ``plugin.parameters[].name``), type and default.

    A NamedTuple, not a dataclass: ``generate`` reads this table before it can start the renderer,
    and keeping ``dataclasses`` (which imports ``inspect``) off that path saves ~8 ms per render.
    """

    name: str
    collection: str
    default: Any
    title: str
    tooltip: str
    item_type: str = "string"
    choices: tuple[str, ...] = ()
    check: Callable[[Any], Any] | None = None
    tools: tuple[str, ...] = ()
    """The renderers this option applies to (empty: every one, e.g. the guards' parameters). An
    Application setting it for another tool gets an error naming it (``not_applying``)."""

    def announcement(self, value: Any = None) -> dict[str, Any]:
        """The ParameterAnnouncement for Argo CD, showing ``value`` (default when None)."""
        shown = self.default if value is None else value
        out: dict[str, Any] = {"name": self.name, "title": self.title, "tooltip": self.tooltip}
        if self.item_type != "string":
            out["itemType"] = self.item_type
        if self.collection == ARRAY:
            out["collectionType"] = ARRAY
            out["array"] = [str(v) for v in shown]
        elif self.collection == MAP:
            out["collectionType"] = MAP
            out["map"] = {str(k): str(v) for k, v in shown.items()}
        else:
            out["string"] = _to_text(shown)
        return out

    def parse(self, raw: Any, *, origin: str) -> Any:
        """Turn what Argo CD sent (always strings) into a typed value, or raise InputError."""
        if _unpassable(raw):
            raise InputError(f"parameter {self.name} ({origin}) holds a NUL character or a lone surrogate")
        if self.collection == ARRAY:
            if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
                raise InputError(f"parameter {self.name} ({origin}) must be an array of strings")
            value: Any = list(raw)
        elif self.collection == MAP:
            if not isinstance(raw, dict):
                raise InputError(f"parameter {self.name} ({origin}) must be a map")
            value = {str(k): str(v) for k, v in raw.items()}
        else:
            if not isinstance(raw, str):
                raise InputError(f"parameter {self.name} ({origin}) must be a string")
            value = _typed(self, raw.strip() if self.item_type != "string" else raw, origin)
        if self.check is not None:
            value = self.check(value)
        return value


def _unpassable(raw: Any) -> bool:
    """Whether a string in ``raw`` holds what no argv, environment or file name can carry: a NUL
    (JSON's ``\\u0000``; Go's encoder writes one for a NUL byte) or a lone surrogate (``\\ud800``)."""
    if isinstance(raw, str):
        return "\x00" in raw or (not raw.isascii() and _no_utf8(raw))
    if isinstance(raw, list):
        return any(_unpassable(v) for v in raw)
    if isinstance(raw, dict):
        return any(_unpassable(k) or _unpassable(v) for k, v in raw.items())
    return False


def _no_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _typed(param: Param, raw: str, origin: str) -> Any:
    if param.item_type == "boolean":
        lowered = raw.lower()
        if lowered in ("true", "yes", "1", "on"):
            return True
        if lowered in ("false", "no", "0", "off", ""):
            return False
        raise InputError(f"parameter {param.name} ({origin}) must be true or false, got {raw!r}")
    if param.item_type == "number":
        try:
            number = float(raw)
        except ValueError as exc:
            raise InputError(f"parameter {param.name} ({origin}) must be a number, got {raw!r}") from exc
        if not isfinite(number) or "_" in raw:
            # nan, inf, 1e400 (inf once read) and Python-only spellings (1_000): no count or ratio
            shown = raw if len(raw) <= 40 else raw[:40] + "..."
            raise InputError(f"parameter {param.name} ({origin}) must be a finite number, got {shown!r}")
        return int(number) if number.is_integer() and "." not in raw else number
    if param.choices and raw not in param.choices:
        raise InputError(
            f"parameter {param.name} ({origin}) must be one of {', '.join(param.choices)}; got {raw!r}"
        )
    return raw


def _ratio(value: Any) -> Any:
    if not 0 <= float(value) <= 1:
        raise InputError(f"parameter max-prune-ratio must be between 0 and 1, got {value}")
    return float(value)


def _non_negative(value: Any) -> Any:
    if int(value) != value or value < 0:
        raise InputError(f"parameter max-prune-count must be a whole number >= 0, got {value}")
    return int(value)


def _release_name(value: Any) -> Any:
    if value and not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", value):
        raise InputError(
            f"parameter release-name {value!r} is not a valid Helm release name (lowercase DNS label)"
        )
    return value


def _helm_keys(value: Any) -> Any:
    """Keys of --set/--set-string/--set-file: helm's strvals splits at ',' and '=', so neither may be in one.

    Argo CD passes the key unescaped (util/helm/cmd.go), so there a key like ``a=/etc/passwd,b``
    would name a second entry: refused here.
    """
    for key in value:
        if not key.strip() or "," in key or "=" in key:
            raise InputError(f"helm value key {key!r} must be non-empty and hold neither ',' nor '='")
    return value


def _set_files(value: Any) -> Any:
    _helm_keys(value)
    for key, path in value.items():
        if "," in path:  # helm would split the path into more entries
            raise InputError(
                f"set-file {key}: the path {path!r} holds a ',' (helm would split it); rename the file"
            )
    return value


def _kube_version(value: Any) -> Any:
    """k8s.io/apimachinery's ParseGeneric, then String(), as Argo CD applies it (parseKubeVersion)."""
    if not value:
        return value
    m = re.fullmatch(r"\s*v?([0-9]+(?:\.[0-9]+)+)(.*)", value)
    # util/version/version.go parse: each component is strconv.ParseUint(comp, 10, 0), an error
    # past 64 bits (and Python's int() refuses over 4,300 digits: never reached with one)
    parts = m.group(1).split(".") if m else []
    if not m or any(len(c.lstrip("0")) > 20 or int(c) >= 1 << 64 for c in parts):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InputError(
            f"parameter kube-version {shown!r} is not a Kubernetes version such as 1.32 or v1.32.3"
        )
    return ".".join(str(int(c)) for c in parts)


def _api_versions(value: Any) -> Any:
    for item in value:
        if not re.fullmatch(r"[A-Za-z0-9.\-]+(/[A-Za-z0-9.\-]+){0,2}", item):
            raise InputError(f"parameter api-versions: {item!r} is not an API version such as apps/v1")
    return value


HELM, KUSTOMIZE, DIRECTORY = ("helm",), ("kustomize",), ("directory",)

PARAMETERS: tuple[Param, ...] = (
    Param(
        "values-files",
        ARRAY,
        [],
        "Values files",
        "Helm values files, applied in order; paths relative to the app directory, anywhere inside the repository",
        tools=HELM,
    ),
    Param(
        "values",
        STRING,
        "",
        "Inline values",
        "Helm values as YAML, applied after every values file",
        tools=HELM,
    ),
    Param(
        "release-name",
        STRING,
        "",
        "Release name",
        "Helm release name; default: the Application's name",
        check=_release_name,
        tools=HELM,
    ),
    Param(
        "namespace",
        STRING,
        "",
        "Namespace",
        "Namespace to render into; default: the Application's destination namespace",
    ),
    Param(
        "include-crds",
        STRING,
        True,
        "Include CRDs",
        "Render the chart's CRDs (helm template --include-crds)",
        item_type="boolean",
        tools=HELM,
    ),
    Param(
        "set",
        MAP,
        {},
        "Helm --set",
        "Helm values by key (helm template --set key=value; Argo CD's helm.parameters), applied after values files",
        check=_helm_keys,
        tools=HELM,
    ),
    Param(
        "set-string",
        MAP,
        {},
        "Helm --set-string",
        "Helm values kept as strings (--set-string; Argo CD's helm.parameters with forceString)",
        check=_helm_keys,
        tools=HELM,
    ),
    Param(
        "set-file",
        MAP,
        {},
        "Helm --set-file",
        "Helm values read from files (--set-file; Argo CD's helm.fileParameters); paths relative to the app directory, inside the repository",
        check=_set_files,
        tools=HELM,
    ),
    Param(
        "skip-crds",
        STRING,
        False,
        "Skip CRDs",
        "Leave the chart's crds/ out (Argo CD's helm.skipCrds: no --include-crds)",
        item_type="boolean",
        tools=HELM,
    ),
    Param(
        "skip-schema-validation",
        STRING,
        False,
        "Skip schema validation",
        "helm template --skip-schema-validation (Argo CD's helm.skipSchemaValidation)",
        item_type="boolean",
        tools=HELM,
    ),
    Param(
        "skip-tests",
        STRING,
        False,
        "Skip tests",
        "helm template --skip-tests (Argo CD's helm.skipTests)",
        item_type="boolean",
        tools=HELM,
    ),
    Param(
        "ignore-missing-values-files",
        STRING,
        False,
        "Ignore missing values files",
        "Skip values-files entries that do not exist (Argo CD's helm.ignoreMissingValueFiles); outside the repository is still refused",
        item_type="boolean",
        tools=HELM,
    ),
    Param(
        "kube-version",
        STRING,
        "",
        "Kubernetes version",
        "helm template --kube-version; default: the cluster's (KUBE_VERSION). Argo CD's helm.kubeVersion",
        check=_kube_version,
        tools=HELM,
    ),
    Param(
        "api-versions",
        ARRAY,
        [],
        "API versions",
        "helm template --api-versions, replacing the cluster's (KUBE_API_VERSIONS). Argo CD's helm.apiVersions",
        check=_api_versions,
        tools=HELM,
    ),
    Param(
        "recurse",
        STRING,
        False,
        "Directory: recurse",
        "Read sub-directories too (Argo CD's directory.recurse); default: the top level only",
        item_type="boolean",
        tools=DIRECTORY,
    ),
    Param(
        "include",
        STRING,
        "",
        "Directory: include",
        "Only files whose path (relative to the app directory) matches this glob, e.g. {a.yaml,env/*.yaml} (Argo CD's directory.include)",
        tools=DIRECTORY,
    ),
    Param(
        "exclude",
        STRING,
        "",
        "Directory: exclude",
        "Leave out files whose path (relative to the app directory) matches this glob (Argo CD's directory.exclude)",
        tools=DIRECTORY,
    ),
    Param(
        "allow-empty",
        STRING,
        False,
        "Allow an empty render",
        "Let a render with zero resources through (Argo CD would then prune everything)",
        item_type="boolean",
    ),
    Param(
        "renderer",
        STRING,
        "auto",
        "Renderer",
        "auto (by marker files), helm, kustomize or directory",
        choices=("auto", "helm", "kustomize", "directory"),
    ),
    Param(
        "kustomize-enable-helm",
        STRING,
        False,
        "Kustomize: enable Helm",
        "kustomize build --enable-helm; only the platform turns it on (DRIFTGUARD_KUSTOMIZE_ENABLE_HELM), an app may turn it off",
        item_type="boolean",
        tools=KUSTOMIZE,
    ),
    Param(
        "kustomize-load-restrictor",
        STRING,
        "LoadRestrictionsRootOnly",
        "Kustomize: load restrictor",
        "Only the platform opens it (DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR); an app may only set LoadRestrictionsRootOnly",
        choices=("LoadRestrictionsRootOnly", "LoadRestrictionsNone"),
        tools=KUSTOMIZE,
    ),
    Param(
        "stray-patterns",
        ARRAY,
        [],
        "More stray patterns",
        "Extra globs (relative to the app directory) that mark committed render output",
    ),
    Param(
        "implicit-defaults",
        STRING,
        "warn",
        "Implicit chart defaults",
        "refuse, warn or off: values keys that gate whole resources which this environment does not set",
        choices=("refuse", "warn", "off"),
    ),
    Param(
        "explicit-keys",
        ARRAY,
        [],
        "Keys that must be explicit",
        "Values keys (dotted) that must be set by this environment even in warn mode, e.g. enabled",
    ),
    Param(
        "max-prune-ratio",
        STRING,
        0.2,
        "Max prune ratio",
        "Refuse when the render drops more than this share of what the Application manages now",
        item_type="number",
        check=_ratio,
    ),
    Param(
        "max-prune-count",
        STRING,
        10,
        "Max prune count",
        "Refuse when the render drops more than this many resources",
        item_type="number",
        check=_non_negative,
    ),
    Param(
        "protected-kinds",
        ARRAY,
        ["Namespace", "PersistentVolumeClaim", "CustomResourceDefinition", "StatefulSet"],
        "Protected kinds",
        "Kinds whose removal is always refused without an approval",
    ),
)

_BY_NAME = {p.name: p for p in PARAMETERS}


def by_name(name: str) -> Param:
    """The parameter called ``name``; an unknown name is an InputError listing the known ones."""
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(p.name for p in PARAMETERS)
        raise InputError(f"unknown parameter {name!r}; known parameters: {known}") from None


def not_applying(names: frozenset[str] | set[str], renderer: str) -> list[str]:
    """The parameters among ``names`` (set by the Application) that do not apply to ``renderer``."""
    return [p.name for p in PARAMETERS if p.name in names and p.tools and renderer not in p.tools]


def env_name(name: str) -> str:
    """Argo CD's PARAM_* spelling of a name: upper case, anything else than A-Z0-9 becomes '_'."""
    return _NOT_IN_ENV_NAME.sub("_", name.upper())


def param_env_prefix(name: str) -> str:
    return f"PARAM_{env_name(name)}"

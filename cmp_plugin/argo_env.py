"""What Argo CD hands a CMP command, as one typed object.

Inputs: ``ARGOCD_APP_NAME`` (``<namespace>_<name>`` for apps outside the control-plane namespace:
the Helm release name drops the prefix, as native Argo CD does), ``ARGOCD_APP_NAMESPACE``,
``ARGOCD_APP_REVISION``, ``ARGOCD_APP_SOURCE_PATH``, ``ARGOCD_APP_SOURCE_REPO_URL``,
``KUBE_VERSION``, ``KUBE_API_VERSIONS``, ``ARGOCD_ENV_*``, and the parameters: the JSON in
``ARGOCD_APP_PARAMETERS`` (else the ``PARAM_*`` variables), then ``ARGOCD_ENV_DRIFTGUARD_<NAME>``
for what the parameters do not set, then the table's default. Both come from the Application
(``plugin.parameters`` and ``plugin.env``): they are the tenant's, and ``cmp_plugin.policy`` decides
what they may loosen; the platform's defaults come from the sidecar (``DRIFTGUARD_*``, the policy file).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from cmp_plugin.params import ARRAY, MAP, PARAMETERS, by_name, env_name, param_env_prefix
from driftguard.errors import InputError

# compiled once at import: the preload server imports this module, so no forked render compiles them
_API_SEPARATORS = re.compile(r"[,\s]+")
_INDEXED = {
    p.name: re.compile(re.escape(param_env_prefix(p.name)) + r"_(\d+)")
    for p in PARAMETERS
    if p.collection == ARRAY
}

__all__ = ["AppEnv", "parse_parameters"]

ENV_PREFIX = "ARGOCD_ENV_DRIFTGUARD_"


class AppEnv(NamedTuple):
    """One CMP invocation's context (a NamedTuple: read before the renderer starts; see params.Param)."""

    app_name: str = ""
    app_namespace: str = ""
    project: str = ""
    """ARGOCD_APP_PROJECT_NAME: the AppProject, which picks the guard policy's entry (cmp_plugin/policy.py)."""
    revision: str = ""
    source_path: str = ""
    repo_url: str = ""
    kube_version: str = ""
    api_versions: tuple[str, ...] = ()
    params: Mapping[str, Any] = MappingProxyType({})
    explicit: frozenset[str] = frozenset()
    """Parameters the Application (or the plugin env) set, as opposed to defaults."""
    env: Mapping[str, str] = MappingProxyType({})
    """The ARGOCD_ENV_* variables, prefix removed (for information; never passed to a shell)."""

    @property
    def release_name(self) -> str:
        """The Helm release name: the parameter, else the app name without its ``<namespace>_`` prefix."""
        explicit = str(self.params.get("release-name") or "")
        return explicit or self.app_name.split("_", 1)[-1] or "release"

    @property
    def namespace(self) -> str:
        """The namespace the tools render for (helm's ``--namespace``): the parameter may change it."""
        return str(self.params.get("namespace") or self.app_namespace or "default")

    @property
    def destination_namespace(self) -> str:
        """Where Argo CD puts a namespaced object that names none: ``spec.destination.namespace``.

        controller/state.go NormalizeTargetObjects sets exactly this (``ARGOCD_APP_NAMESPACE``, empty
        when the Application names none); the ``namespace`` parameter never changes it.
        """
        return self.app_namespace

    def param(self, name: str) -> Any:
        return self.params[by_name(name).name]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> AppEnv:
        """Read a CMP command's environment; unknown or malformed parameters raise InputError."""
        params, explicit = parse_parameters(environ)
        apis = tuple(
            v.strip() for v in _API_SEPARATORS.split(environ.get("KUBE_API_VERSIONS", "")) if v.strip()
        )
        env = {k[len("ARGOCD_ENV_") :]: v for k, v in environ.items() if k.startswith("ARGOCD_ENV_")}
        return cls(
            app_name=environ.get("ARGOCD_APP_NAME", ""),
            app_namespace=environ.get("ARGOCD_APP_NAMESPACE", ""),
            project=environ.get("ARGOCD_APP_PROJECT_NAME", ""),
            revision=environ.get("ARGOCD_APP_REVISION", ""),
            source_path=environ.get("ARGOCD_APP_SOURCE_PATH", ""),
            repo_url=environ.get("ARGOCD_APP_SOURCE_REPO_URL", ""),
            kube_version=environ.get("KUBE_VERSION", ""),
            api_versions=apis,
            params=params,
            explicit=explicit,
            env=env,
        )


def parse_parameters(
    environ: Mapping[str, str], overrides: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], frozenset[str]]:
    """Typed values of every parameter, and the names that were set rather than defaulted."""
    raw: dict[str, tuple[Any, str]] = {}
    if environ.get("ARGOCD_APP_PARAMETERS", "").strip():
        # Argo CD marshals an Application without plugin.parameters as JSON `null` (a nil Go
        # slice; reposerver/repository/repository.go, getPluginParamEnvs): no parameters, and
        # then no PARAM_* variables either.
        raw.update(_from_app_parameters(environ["ARGOCD_APP_PARAMETERS"]))
    else:
        raw.update(_from_param_vars(environ))
    for key, value in environ.items():
        if key.startswith(ENV_PREFIX):
            name = _name_for_env(key[len(ENV_PREFIX) :], key)
            if name not in raw:
                raw[name] = (_env_value(by_name(name).collection, value, key), key)
    for name, value in (overrides or {}).items():
        raw[by_name(name).name] = (value, "command line")
    params = {p.name: p.default for p in PARAMETERS}
    for name, (value, origin) in raw.items():
        params[name] = by_name(name).parse(value, origin=origin)
    return params, frozenset(raw)


def _from_app_parameters(text: str) -> dict[str, tuple[Any, str]]:
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise InputError(f"ARGOCD_APP_PARAMETERS is not JSON: {exc}") from exc
    except RecursionError as exc:  # Argo CD marshals flat parameters: nothing real nests this deep
        raise InputError("ARGOCD_APP_PARAMETERS is nested too deeply") from exc
    if items is None:
        return {}
    if not isinstance(items, list):
        raise InputError("ARGOCD_APP_PARAMETERS must be a JSON array")
    out: dict[str, tuple[Any, str]] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise InputError("every entry of ARGOCD_APP_PARAMETERS needs a name")
        param = by_name(item["name"])
        key = {ARRAY: "array", MAP: "map"}.get(param.collection, "string")
        if key not in item:
            raise InputError(
                f"parameter {param.name} must be given as `{key}:` in the Application's plugin.parameters"
            )
        out[param.name] = (item[key], "Application plugin.parameters")
    return out


def _from_param_vars(environ: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    out: dict[str, tuple[Any, str]] = {}
    seen: set[str] = set()
    for param in PARAMETERS:
        prefix = param_env_prefix(param.name)
        if param.collection == ARRAY:
            items = {}
            indexed = _INDEXED[param.name]
            for key, value in environ.items():
                m = indexed.fullmatch(key)
                if m:
                    items[int(m.group(1))] = value
                    seen.add(key)
            if items:
                out[param.name] = ([items[i] for i in sorted(items)], prefix + "_N")
        elif prefix in environ:
            out[param.name] = (environ[prefix], prefix)
            seen.add(prefix)
    unknown = sorted(k for k in environ if k.startswith("PARAM_") and k not in seen)
    if unknown:
        known = ", ".join(p.name for p in PARAMETERS)
        raise InputError(f"unknown parameter variable(s) {', '.join(unknown)}; known parameters: {known}")
    return out


def _name_for_env(suffix: str, key: str) -> str:
    for param in PARAMETERS:
        if env_name(param.name) == suffix:
            return param.name
    known = ", ".join(ENV_PREFIX + env_name(p.name) for p in PARAMETERS)
    raise InputError(f"unknown plugin env variable {key}; known: {known}")


def _env_value(collection: str, value: str, key: str) -> Any:
    if collection == STRING_COLLECTION:
        return value
    import yaml

    from driftguard.manifests import safe_load

    try:
        parsed = safe_load(value) if value.strip() else ([] if collection == ARRAY else {})
    except yaml.YAMLError as exc:
        raise InputError(f"{key}: not a YAML {collection}: {exc}") from exc
    if collection == ARRAY and isinstance(parsed, str):
        parsed = [v.strip() for v in parsed.split(",") if v.strip()]
    return parsed


STRING_COLLECTION = "string"

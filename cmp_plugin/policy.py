"""The guard policy the platform owns: what a tenant's Application may loosen, and what it may not set.

Who controls what (docs/security.md): a team owns its repository and its Application, so everything
Argo CD hands the plugin from the Application (``plugin.parameters`` as ``ARGOCD_APP_PARAMETERS`` /
``PARAM_*``, ``plugin.env`` as ``ARGOCD_ENV_*``) is tenant input. The platform owns the sidecar: its
own environment (``DRIFTGUARD_*`` without the ``ARGOCD_ENV_`` prefix) and the policy file
``DRIFTGUARD_CMP_POLICY`` mounted from a ConfigMap.

Two kinds of parameters are policed here:

- *admin-only* options widen what a render may read or run (kustomize's load restrictor and
  ``--enable-helm``). Argo CD takes these only from the admin's argocd-cm ``kustomize.buildOptions``
  (argoproj/argo-cd ``util/settings/settings.go``, ``kustomizeBuildOptionsKey``, applied to every
  build by ``util/kustomize/kustomize.go``), never from an Application; so do we. The platform's
  value comes from the policy entry, else the sidecar's environment, else the safe default; an
  Application may only choose something tighter.
- *guard* parameters (allow-empty, max-prune-ratio, ...): the policy entry gives the default, and
  whether tenants may loosen it (default: they may, as before a policy existed). Tightening is
  always allowed; loosening past a closed entry is refused, naming the entry.

An entry is chosen by the first ``project`` glob matching ``ARGOCD_APP_PROJECT_NAME`` (Argo CD's
``spec.project``, ``default`` when omitted), in file order; ``*`` is the fallback.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from cmp_plugin.argo_env import AppEnv
from cmp_plugin.params import ARRAY, by_name
from cmp_plugin.settings import CmpSettings
from driftguard.errors import ConfigError, GuardRefusal

__all__ = ["ADMIN_ONLY", "GUARDED", "Entry", "Policy", "apply", "enforce", "load"]

SETTING = "DRIFTGUARD_CMP_POLICY"
MAX_POLICY_BYTES = 1 << 20


def _rank(*order: str) -> Callable[[Any], int]:
    return lambda value: order.index(value) if value in order else len(order)


def _number(value: Any) -> float:
    return float(value)


def _flag(value: Any) -> int:
    return 1 if value else 0


# How loose a value is: a larger rank lets more through. Sets are compared by inclusion instead.
LOOSENESS: dict[str, Callable[[Any], Any]] = {
    "allow-empty": _flag,
    "max-prune-ratio": _number,
    "max-prune-count": _number,
    "implicit-defaults": _rank("refuse", "warn", "off"),
    "kustomize-load-restrictor": _rank("LoadRestrictionsRootOnly", "LoadRestrictionsNone"),
    "kustomize-enable-helm": _flag,
}
SETS = ("protected-kinds", "explicit-keys")
"""Array guards: dropping an entry of the policy's list loosens; adding entries tightens."""

ADMIN_ONLY: dict[str, str] = {
    "kustomize-load-restrictor": "DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR",
    "kustomize-enable-helm": "DRIFTGUARD_KUSTOMIZE_ENABLE_HELM",
}
"""Options that widen what the render may read or run -> the sidecar setting that sets them."""

GUARDED = (*LOOSENESS, *SETS)


class Rule(NamedTuple):
    """One parameter in one policy entry."""

    default: Any = None
    """The platform's value (None: the parameter table's default)."""
    loosen: bool | None = None
    """Whether a tenant may set a looser value than ``default`` (None: the entry's, else yes)."""


class Entry(NamedTuple):
    """One ``projects[]`` item of the policy file."""

    position: int
    project: str
    rules: Mapping[str, Rule]
    loosen: bool | None = None
    """The entry-wide ``tenants-may-loosen`` (None: not given, each rule decides)."""

    def where(self) -> str:
        return f"{SETTING} projects[{self.position}] (project {self.project!r})"


class Policy(NamedTuple):
    entries: tuple[Entry, ...] = ()
    source: str = ""

    def entry_for(self, project: str) -> Entry | None:
        """The first entry whose glob matches ``project`` (``*`` entries are tried last)."""
        project = project or "default"
        for wildcard in (False, True):
            for entry in self.entries:
                if (entry.project == "*") == wildcard and fnmatch.fnmatchcase(project, entry.project):
                    return entry
        return None


def load(path: str) -> Policy:
    """Read and validate the policy file; any mistake is a ConfigError naming DRIFTGUARD_CMP_POLICY."""
    if not path:
        return Policy()
    import yaml

    from driftguard.manifests import safe_load

    try:
        with Path(path).open("rb") as f:
            raw = f.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        raise ConfigError(SETTING, f"cannot read {path}: {exc.strerror}") from exc
    if len(raw) > MAX_POLICY_BYTES:
        raise ConfigError(SETTING, f"{path} is larger than {MAX_POLICY_BYTES} bytes")
    try:
        doc = safe_load(raw.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        lines = raw.decode("utf-8", "replace").splitlines()
        if mark is not None and 0 <= mark.line < len(lines):  # name the key (a `.nan` has no line of its own)
            line = lines[mark.line].strip()[:120]
            raise ConfigError(
                SETTING, f"{path} line {mark.line + 1} ({line!r}) is not valid: {_problem(exc)}"
            ) from exc
        raise ConfigError(SETTING, f"{path} is not valid YAML: {exc}") from exc
    if doc is None:
        return Policy(source=path)
    if not isinstance(doc, dict) or not isinstance(doc.get("projects", []), list):
        raise ConfigError(SETTING, "must be a mapping with a `projects:` list")
    unknown = sorted(set(doc) - {"projects"})
    if unknown:
        raise ConfigError(SETTING, f"unknown top-level key(s) {', '.join(map(str, unknown))}")
    entries = tuple(_entry(i, item) for i, item in enumerate(doc.get("projects") or []))
    return Policy(entries, path)


def _problem(exc: BaseException) -> str:
    problem = getattr(exc, "problem", None)
    return str(problem) if problem else str(exc).splitlines()[0]


def _entry(index: int, item: Any) -> Entry:
    where = f"projects[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("project"), str) or not item["project"]:
        raise ConfigError(SETTING, f"{where} needs `project:` (a glob of AppProject names, or *)")
    unknown = sorted(set(item) - {"project", "tenants-may-loosen", "parameters"})
    if unknown:
        raise ConfigError(SETTING, f"{where}: unknown key(s) {', '.join(map(str, unknown))}")
    loosen = item.get("tenants-may-loosen")
    if loosen is not None and not isinstance(loosen, bool):
        raise ConfigError(SETTING, f"{where}.tenants-may-loosen must be true or false")
    params = item.get("parameters") or {}
    if not isinstance(params, dict):
        raise ConfigError(SETTING, f"{where}.parameters must be a mapping of parameter name -> rule")
    rules = {}
    for name, spec in params.items():
        rules[str(name)] = _rule(f"{where}.parameters.{name}", str(name), spec)
    return Entry(index, item["project"], rules, loosen)


def _rule(where: str, name: str, spec: Any) -> Rule:
    if name not in GUARDED:
        raise ConfigError(SETTING, f"{where}: not a guard parameter; policed are {', '.join(GUARDED)}")
    if not isinstance(spec, dict):
        spec = {"default": spec}
    unknown = sorted(set(spec) - {"default", "tenants-may-loosen"})
    if unknown:
        raise ConfigError(SETTING, f"{where}: unknown key(s) {', '.join(map(str, unknown))}")
    loosen = spec.get("tenants-may-loosen")
    if loosen is not None and not isinstance(loosen, bool):
        raise ConfigError(SETTING, f"{where}.tenants-may-loosen must be true or false")
    if loosen and name in ADMIN_ONLY:
        raise ConfigError(
            SETTING, f"{where}: {name} widens what a render may read; tenants can never loosen it"
        )
    default = None
    if "default" in spec:
        default = _typed(name, spec["default"], where)
    return Rule(default, loosen)


def _typed(name: str, value: Any, where: str) -> Any:
    """A policy value checked like the parameter itself (YAML gives bools and numbers; Argo CD strings)."""
    param = by_name(name)
    if param.collection == ARRAY:
        raw: Any = value if isinstance(value, list) else [value]
        raw = [str(v) for v in raw]
    elif isinstance(value, bool):
        raw = "true" if value else "false"
    else:
        raw = str(value)
    try:
        return param.parse(raw, origin=where)
    except Exception as exc:
        raise ConfigError(SETTING, str(exc)) from exc


def looser(name: str, value: Any, floor: Any) -> bool:
    """Whether ``value`` lets more through than ``floor`` for guard ``name``."""
    if name in SETS:
        return not set(value) >= set(floor)
    rank = LOOSENESS[name]
    return bool(rank(value) > rank(floor))


def enforce(
    params: Mapping[str, Any],
    tenant_set: frozenset[str],
    *,
    project: str,
    policy: Policy,
    admin: Mapping[str, Any],
) -> dict[str, Any]:
    """``params`` with the platform's defaults filled in; GuardRefusal when a tenant loosens past policy.

    ``tenant_set``: the parameters the Application set (parameters or plugin.env); the others take
    the platform's value. ``admin``: the sidecar's own value of each admin-only option.
    """
    entry = policy.entry_for(project)
    out = dict(params)
    for name in GUARDED:
        rule = entry.rules.get(name) if entry is not None else None
        admin_only = name in ADMIN_ONLY
        if rule is not None and rule.default is not None:
            floor, where = rule.default, entry.where() if entry else ""
        elif admin_only:
            floor, where = admin[name], ADMIN_ONLY[name]
        else:
            floor, where = by_name(name).default, "the parameter's default"
        if admin_only:
            may_loosen = False
        elif rule is not None and rule.loosen is not None:
            may_loosen = rule.loosen
        elif entry is not None and entry.loosen is not None:
            may_loosen = entry.loosen
        else:
            may_loosen = True
        if name not in tenant_set:
            out[name] = floor
            continue
        if may_loosen or not looser(name, out[name], floor):
            continue
        raise _refusal(name, out[name], floor, where=where, entry=entry, admin=admin_only)
    return out


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _refusal(
    name: str, value: Any, floor: Any, *, where: str, entry: Entry | None, admin: bool
) -> GuardRefusal:
    if admin:
        return GuardRefusal(
            "policy",
            f"parameter {name}={_show(value)} widens what the render may read or run; "
            f"only the platform sets it ({where}: {_show(floor)})",
            details=[
                "Like Argo CD's kustomize.buildOptions in argocd-cm, this option is the sidecar's, "
                "not the Application's; an Application may only choose a tighter value."
            ],
            fix=f"remove {name} from the Application, or ask the platform team to set it in {ADMIN_ONLY[name]} "
            f"or {SETTING}",
        )
    closed_by = entry.where() if entry is not None else SETTING
    return GuardRefusal(
        "policy",
        f"parameter {name}={_show(value)} loosens the guard past policy entry {closed_by}, "
        f"which keeps {name} at {_show(floor)} and does not let tenants loosen it",
        details=[f"tightening is allowed: a value at least as strict as {_show(floor)} passes ({where})"],
        fix=f"remove {name} from the Application or make it stricter; the platform owns {SETTING}",
    )


def apply(env: AppEnv, settings: CmpSettings) -> AppEnv:
    """``env`` under the platform's policy (DRIFTGUARD_CMP_POLICY and the admin-only settings)."""
    admin = {
        "kustomize-load-restrictor": settings.kustomize_load_restrictor,
        "kustomize-enable-helm": settings.kustomize_enable_helm,
    }
    params = enforce(
        env.params, env.explicit, project=env.project, policy=load(settings.policy_file), admin=admin
    )
    return env._replace(params=params)

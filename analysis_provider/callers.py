"""Who may ask about which Application: the callers file (``DRIFTGUARD_ANALYSIS_CALLERS``).

A YAML file the platform mounts::

    callers:
      - name: payments              # shown in logs and metrics, never a token
        tokenFile: /etc/driftguard/callers/payments   # or token: "<32+ characters>"
        projects: ["payments", "payments-*"]           # Argo CD globs on the Application's spec.project
        apps: ["*"]                                    # Argo CD globs on the Application's name

An entry matches an Application when its project and its name both match one of the entry's
globs (driftguard/globs.py: Argo CD's gobwas rules, argo-cd util/glob/glob.go). A bearer token
that no entry holds is a 401; a known caller asking about an Application outside its entry is a
403, and so is one asking about an Application that does not exist unless its entry covers every
project (otherwise the answer would tell it which names exist in other projects).

``DRIFTGUARD_ANALYSIS_TOKEN`` alone is the single-team setting: one caller, ``projects: ["*"]``,
``apps: ["*"]``, named ``DRIFTGUARD_ANALYSIS_TOKEN``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftguard import globs
from driftguard.errors import ConfigError
from driftguard.service import bearer_matches

__all__ = ["SETTING", "Caller", "Callers", "load_callers"]

SETTING = "DRIFTGUARD_ANALYSIS_CALLERS"
_MIN_TOKEN = 16
_KEYS = frozenset({"name", "token", "tokenFile", "projects", "apps"})


@dataclass(frozen=True)
class Caller:
    """One entry: a name, its bearer token, and the Applications it may ask about."""

    name: str
    token: str = field(repr=False)
    projects: tuple[str, ...]
    apps: tuple[str, ...]

    def allows(self, *, project: str, app: str) -> bool:
        """Whether the Application (its ``spec.project`` and name) lies inside this entry."""
        return any(globs.match(p, project) for p in self.projects) and any(
            globs.match(a, app) for a in self.apps
        )

    @property
    def every_project(self) -> bool:
        return "*" in self.projects and "*" in self.apps


@dataclass(frozen=True)
class Callers:
    """Every caller; :meth:`find` compares a bearer header with each token in constant time."""

    entries: tuple[Caller, ...]

    def find(self, header: str) -> Caller | None:
        found = None
        for c in self.entries:  # no early return: the time does not say which entry matched
            if bearer_matches(header, c.token):
                found = c
        return found


def _globs(entry: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(g, str) and g for g in value):
        raise ConfigError(SETTING, f"{where}: `{key}` must be a non-empty list of globs")
    return tuple(value)


def _token(entry: Mapping[str, Any], where: str, base: Path) -> str:
    if ("token" in entry) == ("tokenFile" in entry):
        raise ConfigError(SETTING, f"{where}: give exactly one of `token` or `tokenFile`")
    if "tokenFile" in entry:
        raw = entry["tokenFile"]
        if not isinstance(raw, str) or not raw:
            raise ConfigError(SETTING, f"{where}: `tokenFile` must be a path")
        path = Path(raw) if Path(raw).is_absolute() else base / raw
        try:
            token = path.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                SETTING, f"{where}: `tokenFile` {raw} cannot be read ({type(exc).__name__})"
            ) from exc
    else:
        token = entry["token"] if isinstance(entry["token"], str) else ""
    if len(token) < _MIN_TOKEN or any(ch.isspace() for ch in token):
        raise ConfigError(SETTING, f"{where}: the token must be {_MIN_TOKEN}+ characters without spaces")
    return token


def parse_callers(raw: Any, *, base: Path = Path("/")) -> list[Caller]:
    """The entries of a parsed callers file; ConfigError naming the setting and the entry otherwise."""
    items = raw.get("callers") if isinstance(raw, dict) else None
    if not isinstance(items, list) or not items:
        raise ConfigError(
            SETTING, "must hold `callers:`, a non-empty list of {name, token or tokenFile, projects, apps}"
        )
    out: list[Caller] = []
    for n, entry in enumerate(items):
        where = f"callers[{n}]"
        if not isinstance(entry, dict):
            raise ConfigError(SETTING, f"{where} is not an object")
        unknown = sorted(set(entry) - _KEYS)
        if unknown:
            raise ConfigError(SETTING, f"{where}: unknown key(s) {', '.join(map(str, unknown))}")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 63:
            raise ConfigError(SETTING, f"{where}: `name` is required (up to 63 characters)")
        where = f"{where} ({name})"
        out.append(
            Caller(
                name=name,
                token=_token(entry, where, base),
                projects=_globs(entry, "projects", where),
                apps=_globs(entry, "apps", where),
            )
        )
    return out


def load_callers(path: str, *, single_token: str = "") -> Callers:
    """The callers file (if any) plus the single-team token as a caller of every project."""
    entries: list[Caller] = []
    if path:
        from driftguard.manifests import safe_load

        where = Path(path)
        try:
            raw = safe_load(where.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(SETTING, f"{path} cannot be read ({type(exc).__name__})") from exc
        except Exception as exc:  # a YAML error: its position, not the file's content
            raise ConfigError(SETTING, f"{path} is not valid YAML ({type(exc).__name__})") from exc
        entries = parse_callers(raw, base=where.parent)
    if single_token:
        entries.append(Caller("DRIFTGUARD_ANALYSIS_TOKEN", single_token, ("*",), ("*",)))
    _unique(entries)
    return Callers(tuple(entries))


def _unique(entries: Sequence[Caller]) -> None:
    names: set[str] = set()
    tokens: set[str] = set()
    for c in entries:
        if c.name in names:
            raise ConfigError(SETTING, f"caller name {c.name!r} is used twice")
        if c.token in tokens:
            raise ConfigError(SETTING, f"caller {c.name!r} has another caller's token: each needs its own")
        names.add(c.name)
        tokens.add(c.token)

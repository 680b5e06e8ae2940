"""Settings from the environment, one way for every component: a table of NAME -> (attribute, convert)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from driftguard.errors import ConfigError

__all__ = ["boolean", "from_env", "positive", "secret"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def from_env(
    env: Mapping[str, str], fields: Mapping[str, tuple[str, Callable[[str], Any]]]
) -> dict[str, Any]:
    """``{attr: value}`` for each set variable in ``fields``; a value the converter refuses names the variable."""
    out: dict[str, Any] = {}
    for name, (attr, convert) in fields.items():
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        try:
            out[attr] = convert(raw)
        except ValueError as exc:
            raise ConfigError(name, f"cannot use {raw!r}: {exc}") from exc
    return out


def boolean(raw: str) -> bool:
    """true/false, yes/no, on/off, 1/0."""
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("expected true or false")


def positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    """A converter to ``kind`` that refuses zero and negative numbers."""

    def convert(raw: str) -> float:
        value = kind(raw)
        if value <= 0:
            raise ValueError("must be greater than 0")
        return value

    return convert


def secret(env: Mapping[str, str], name: str) -> str:
    """A secret from ``NAME`` or from the file ``NAME_FILE`` names (a mounted Secret key), never both.

    The file's text is stripped: a mounted key often ends with a newline. Errors name the variable,
    never the value.
    """
    value, path = env.get(name, ""), env.get(f"{name}_FILE", "").strip()
    if value and path:
        raise ConfigError(name, f"set it or {name}_FILE, not both")
    if not path:
        return value
    try:
        return Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}_FILE", f"cannot be read ({type(exc).__name__})") from exc

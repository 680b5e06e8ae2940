"""Go's ``fmt.Sprintf("%v", v)`` and ``path.Match`` for the values and patterns generators handle.

Argo's files generator flattens a file's keys and formats each value with ``%v``
(applicationset/generators/git.go); numbers arrive as float64 (YAML goes through JSON), so 3 is
``3``, 1000000 is ``1e+06`` and true is ``true``. Directory patterns use Go's ``path.Match``,
where ``*`` never crosses a ``/``.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from typing import Any

__all__ = ["flatten", "format_v", "path_match"]


def format_v(value: Any) -> str:
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _format_float(float(value))
    if isinstance(value, list):
        return "[" + " ".join(format_v(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{format_v(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def _format_float(x: float) -> str:
    """%v of a float64: shortest digits, exponent form when exp < -4 or exp >= 6 (strconv's shortest %g)."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    exp = len(text) + exponent - 1
    neg = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{neg}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exponent >= 0:
        return neg + text + "0" * exponent
    point = len(text) + exponent
    if point > 0:
        return neg + text[:point] + "." + text[point:]
    return neg + "0." + "0" * (-point) + text


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """jeremywohl/flatten DotStyle, as Argo uses it: nested keys joined by ``.``, list items by index."""
    out: dict[str, Any] = {}
    items: list[tuple[str, Any]]
    if isinstance(obj, dict):
        items = [(str(k), v) for k, v in obj.items()]
    elif isinstance(obj, list):
        items = [(str(i), v) for i, v in enumerate(obj)]
    else:
        return {prefix: obj}
    for k, v in items:
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict | list) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


@lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("^", "]") else i + 1)
            if end < 0:
                raise ValueError(f"syntax error in pattern {pattern!r}")
            body = pattern[i + 1 : end]
            negate = body.startswith("^")
            body = body[1:] if negate else body
            out.append("[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def path_match(pattern: str, name: str) -> bool:
    """Go's path.Match; a malformed pattern matches nothing (Argo logs it and goes on)."""
    try:
        return _compile(pattern).match(name) is not None
    except (ValueError, re.error):
        return False

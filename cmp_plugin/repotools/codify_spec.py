"""What ``driftguard-cmp codify`` is asked to reproduce: ``KIND/NAMESPACE/NAME:POINTER=VALUE``.

POINTER is an RFC 6901 JSON pointer into the live object (the form the notifier's alert and
driftguard/diff.py print), VALUE a YAML scalar or flow value. ``--from-alert`` reads the same
changes from the notifier's JSON (driftguard/report.py ``DriftReport.to_json``): its human changes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from driftguard.codify_line import change_spec
from driftguard.diff import unescape
from driftguard.errors import InputError
from driftguard.redact import MASK

__all__ = ["Change", "from_alert", "get_at", "parse_change", "spec_of", "tokens"]


class Change(NamedTuple):
    """One live value to reproduce in the render."""

    kind: str
    namespace: str
    name: str
    pointer: str
    value: Any

    def __str__(self) -> str:
        return spec_of(self)


def spec_of(change: Change) -> str:
    """The SPEC text of a change (VALUE as compact JSON, which is a YAML flow value)."""
    return change_spec(*change)


def tokens(pointer: str) -> list[str]:
    """The reference tokens of a JSON pointer; InputError when it is not one."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise InputError(f"{pointer!r} is not a JSON pointer (it must start with /)")
    parts = pointer[1:].split("/")
    for part in parts:
        if "~" in part.replace("~0", "").replace("~1", ""):
            raise InputError(f"{pointer!r}: a ~ must be written ~0 or ~1 (RFC 6901)")
    return [unescape(p) for p in parts]


def parse_change(spec: str) -> Change:
    """``KIND/NAMESPACE/NAME:POINTER=VALUE``; NAMESPACE empty for a cluster-scoped resource.

    A name may hold ``:`` (``system:auth-delegator``) but never ``/``: the pointer starts at the
    first ``:/``. VALUE is split at the first ``=`` after the pointer's start (a JSON pointer into
    a Kubernetes object holds no ``=``: label and annotation keys cannot).
    """
    import yaml

    from driftguard.manifests import safe_load

    ident, sep, rest = spec.partition(":/")
    if not sep:
        raise InputError(f"--change {spec!r}: expected KIND/NAMESPACE/NAME:POINTER=VALUE")
    parts = ident.split("/")
    if len(parts) != 3 or not parts[0] or not parts[2]:
        raise InputError(f"--change {spec!r}: expected KIND/NAMESPACE/NAME before the pointer")
    pointer, eq, text = ("/" + rest).partition("=")
    if not eq:
        raise InputError(f"--change {spec!r}: no =VALUE after the pointer")
    tokens(pointer)
    if not tokens(pointer):
        raise InputError(f"--change {spec!r}: the pointer names the whole object")
    try:
        value = safe_load(text) if text.strip() else ""
    except yaml.YAMLError as exc:
        raise InputError(f"--change {spec!r}: VALUE is not a YAML scalar or flow value") from exc
    _check_value(value, spec)
    return Change(parts[0], parts[1], parts[2], pointer, value)


def _check_value(value: Any, what: str) -> None:
    if isinstance(value, str) and value.startswith(MASK):
        raise InputError(f"{what}: the value is redacted in the alert; codify needs the real value")


def from_alert(path: Path) -> list[Change]:
    """The human changes of a notifier alert (JSON: ``alerting`` items, or a list of them)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"--from-alert {path}: not a readable JSON file") from exc
    items = data.get("alerting") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise InputError(f"--from-alert {path}: no `alerting` list (the notifier's alert JSON)")
    out = []
    for item in items:
        if not isinstance(item, dict) or item.get("class", "human") != "human":
            continue
        res = item.get("resource")
        if not isinstance(res, dict) or not isinstance(item.get("path"), str):
            raise InputError(f"--from-alert {path}: an alerting item without resource and path")
        if item.get("op") == "remove":
            raise InputError(
                f"--from-alert {path}: {res.get('kind')}/{res.get('name')} {item['path']} was removed live; "
                "codify reproduces values, not removals"
            )
        _check_value(item.get("new"), f"--from-alert {path}: {item['path']}")
        tokens(str(item["path"]))
        out.append(
            Change(
                str(res.get("kind", "")),
                str(res.get("namespace", "")),
                str(res.get("name", "")),
                str(item["path"]),
                item.get("new"),
            )
        )
    if not out:
        raise InputError(f"--from-alert {path}: no human change to codify")
    return out


_MISSING = object()


def get_at(obj: Any, parts: list[str]) -> Any:
    """The value at a pointer's tokens, or ``MISSING``."""
    node = obj
    for part in parts:
        if isinstance(node, dict):
            if part not in node:
                return _MISSING
            node = node[part]
        elif isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                return _MISSING
            node = node[int(part)]
        else:
            return _MISSING
    return node


MISSING = _MISSING

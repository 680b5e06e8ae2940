"""The ``driftguard-cmp codify`` command an alert prints for a human change (docs/codify.md).

Shared by the notifier (the line in every channel) and the CMP (``codify_spec.spec_of``): the
SPEC is ``KIND/NAMESPACE/NAME:POINTER=VALUE`` with VALUE as compact JSON (a YAML flow value), and
the command is codify's PATH form built from the Application: its source path, its plugin's
``values-files``, its name and destination namespace, every word shell-quoted.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

__all__ = ["change_spec", "codify_args", "codify_command"]


def change_spec(kind: str, namespace: str, name: str, pointer: str, value: Any) -> str:
    """``KIND/NAMESPACE/NAME:POINTER=VALUE``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"{kind}/{namespace}/{name}:{pointer}={text}"


def codify_args(app: Mapping[str, Any]) -> list[str]:
    """codify's PATH-form arguments for an Application (empty when it has no single source path)."""
    spec = app.get("spec") or {}
    source = spec.get("source") if isinstance(spec, Mapping) else None
    if not isinstance(source, Mapping) or not isinstance(source.get("path"), str):
        return []
    out = [str(source["path"]).strip("/") or "."]
    plugin = source.get("plugin")
    for p in (plugin.get("parameters") or []) if isinstance(plugin, Mapping) else []:
        if isinstance(p, Mapping) and p.get("name") == "values-files" and isinstance(p.get("array"), list):
            for f in p["array"]:
                out += ["--values-file", str(f)]
    meta = app.get("metadata") or {}
    dest = spec.get("destination") or {}
    if isinstance(meta, Mapping) and meta.get("name"):
        out += ["--app-name", str(meta["name"])]
    if isinstance(dest, Mapping) and dest.get("namespace"):
        out += ["--namespace", str(dest["namespace"])]
    return out


def codify_command(args: list[str], spec: str) -> str:
    """The copy-pasteable line: ``driftguard-cmp codify ARGS --change 'SPEC'``."""
    if not args:
        return ""
    return shlex.join(["driftguard-cmp", "codify", *args, "--change", spec])

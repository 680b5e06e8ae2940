"""How a field change reads for a person: a readable path and short values (alerts and the PR check).

Pure rules with no Flask and no app behind them, so the notifier's alerts (notifier/digest.py) and
the CMP's PR check (cmp_plugin/prcheck/diffreport.py) write a change the same way:
``containers[server].resources.limits["nvidia.com/gpu"]`` 2 -> 4.
"""

from __future__ import annotations

import json
import re
from typing import Any

from driftguard.diff import ListSeg, Segment, unescape

__all__ = ["NAME_CHARS", "PATH_CHARS", "VALUE_CHARS", "readable_path", "short"]

VALUE_CHARS = 80
PATH_CHARS = 160
NAME_CHARS = 120
_PREFIXES = (
    "spec.jobTemplate.spec.template.spec.",
    "spec.template.spec.",
)
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def short(v: Any, limit: int = VALUE_CHARS) -> str:
    """One line, at most ``limit`` characters: strings as they are, everything else compact JSON."""
    if v is None:
        text = "∅"
    elif isinstance(v, str):
        text = v
    else:
        text = json.dumps(v, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    text = " ".join(text.split()) if ("\n" in text or "\r" in text or "\t" in text) else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _keyed(seg: ListSeg) -> str:
    if seg.key:
        values = [str(v) for _, v in seg.key]
        return "[" + ",".join(values) + "]"
    return f"[{seg.index}]"


def readable_path(path: str, segments: tuple[Segment, ...] = ()) -> str:
    """``/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu`` -> ``containers[server].resources.limits["nvidia.com/gpu"]``.

    List items are named by their merge key when the diff knows it (``segments``), else by index.
    """
    parts: list[str] = []
    if segments:
        for s in segments:
            if isinstance(s, ListSeg):
                parts.append(_keyed(s))
            else:
                parts.append(s)
    else:
        parts = [unescape(t) for t in path.split("/")[1:]] if path else []
    out = ""
    for p in parts:
        if p.startswith("[") and p.endswith("]"):
            out += p
        elif p.isdigit() and out:
            out += f"[{p}]"
        elif _PLAIN.match(p):
            out += ("." if out else "") + p
        else:
            out += "[" + json.dumps(p, ensure_ascii=False) + "]"
    for prefix in _PREFIXES:
        if out.startswith(prefix):
            out = out[len(prefix) :]
            break
    return short(out, PATH_CHARS) if out else ""

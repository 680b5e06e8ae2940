"""The escaping every channel shares: a view's cluster- or Git-sourced strings passed through the
channel's own escape function (``escaped``), line by line (``by_line``), on one line (``one_line``).

A ConfigMap value is attacker-controlled text for anyone who can write to a namespace: it must
never become a mention, a link or formatting in a chat. Channels escape a copy of the digest
with their own function before the templates see it (Feishu ``feishu_md`` in
notifier/channels/feishu.py, Slack ``slack_code`` and ``slack_text`` in notifier/channels/slack.py);
plain-text fields (card and Slack headers, PagerDuty's summary) are rendered from the raw digest and
need only line breaks removed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["NAMED_BY_CLUSTER", "OURS", "by_line", "escaped", "one_line"]

OURS = frozenset(
    {
        "cls",
        "severity",
        "link",
        "resource_link",
        "label",
        "unit",
        "todo",
        "classes",
        "event",
        "kind_of",
        "zone",
    }
)
"""Keys whose values we wrote ourselves (class names, severities, links built from our config; the
resource link's cluster parts are percent-encoded)."""
NAMED_BY_CLUSTER = frozenset({"counts"})
"""Mappings whose keys come from the cluster (a notice's counts by kind)."""


def one_line(text: str) -> str:
    """Line breaks (and other vertical space) folded into single spaces."""
    return " ".join(text.split()) if any(c in text for c in "\n\r\t\v\f\u2028\u2029") else text


def escaped(value: Any, fn: Callable[[str], str], key: str = "") -> Any:
    """A copy of a digest or notice view with every string not in OURS passed through ``fn``."""
    if key in OURS:
        return value
    if isinstance(value, str):
        return fn(value) if value else value  # "" stays falsy: templates test optional fields with `if`
    if isinstance(value, dict):
        if key in NAMED_BY_CLUSTER:
            return {fn(str(k)): escaped(v, fn) for k, v in value.items()}
        return {k: escaped(v, fn, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escaped(v, fn, key) for v in value]
    return value


def by_line(text: str, fn: Callable[[str], str]) -> str:
    """``fn`` applied to each line, the line breaks kept (Argo CD's multi-line messages in channels that have them)."""
    return "\n".join(fn(line) for line in text.splitlines() if line.strip())

"""Per-channel escaping of every value that comes from the cluster or Git (names, paths, values, managers).

A ConfigMap value is attacker-controlled text for anyone who can write to a namespace: it must
never become a mention, a link or formatting in a chat. Channels escape a copy of the digest
with one of these before the templates see it; plain-text fields (card and Slack headers,
PagerDuty's summary) are rendered from the raw digest and need only line breaks removed.

- Feishu ``markdown`` (card JSON 2.0): markdown specials and ``<``/``>``/``&`` become HTML
  entities, so ``<at id=all></at>`` and ``[x](https://...)`` show as text; a URL's ``://`` gets
  a zero-width space so it is not auto-linked.
- Slack mrkdwn: ``&``, ``<``, ``>`` are the only characters Slack lets one escape (its "Formatting
  text" guide); so values go inside inline code, where ``*_~`` are literal, and a backtick in a
  value becomes U+02CB (a lookalike) so the span cannot be closed from inside.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["OURS", "escaped", "feishu_md", "slack_code", "slack_text"]

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

_FEISHU = {c: f"&#{ord(c)};" for c in "*_~`[]()#|\\{}"}
_FEISHU.update({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _one_line(text: str) -> str:
    return " ".join(text.split()) if any(c in text for c in "\n\r\t\v\f\u2028\u2029") else text


def feishu_md(text: str) -> str:
    """Literal text inside a Feishu markdown component."""
    text = _one_line(text).replace("://", ":\u200b//")
    return "".join(_FEISHU.get(c, c) for c in text)


def slack_text(text: str) -> str:
    """Slack's three control characters escaped (for ``text`` fallbacks and outside code)."""
    return _one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_code(text: str) -> str:
    """A value to put between backticks: nothing in it can close the span or format."""
    text = slack_text(text).replace("`", "\u02cb").replace("://", ":\u200b//")
    return text if text.strip() else "-"


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

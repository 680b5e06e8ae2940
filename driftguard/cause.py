"""Why Argo CD would prune or misses resources: a refused or failed render, read from the Application.

One module owns both sides of the format, so the CMP that writes it and the notifier that reads it
cannot drift apart. When ``driftguard-cmp generate`` refuses, its stderr reaches the Application
unchanged but wrapped: Argo CD's cmp-server returns ``\\`<cmd>\\` failed exit status 3: <stderr>``
(cmpserver/plugin/plugin.go, ``CmdError``), the repo-server prefixes ``error generating manifests
in cmp:`` (reposerver/repository/repository.go), and the controller stores ``Failed to load target
state: failed to generate manifest for source 1 of 1: rpc error: ...`` as a ``ComparisonError``
condition (controller/state.go). Then Argo CD has no target objects, marks every live resource as
requiring pruning and sets the sync status Unknown, so it syncs and prunes nothing: the prune set
in the report is the refused render's, and this cause says so.

The lines the CMP writes (cmp_plugin/cli.py ``format_failure``), each on a line of its own:

    driftguard: refused by <guard>: <reason>           (the headline, after Argo CD's prefixes)
    driftguard: gating key `<key>` relies on the chart default (<template>:<line>)
    driftguard: gating key `<key>` is set by this environment (<template>:<line>)

Only these are read: guard name, reason, key names, origins and template:line; never the values
lines (a values key may hold a secret). Everything read is masked (driftguard.redact.scrub_text),
one line and bounded; tenants write charts and values, so channels still escape it as cluster text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from driftguard.redact import scrub_text

__all__ = [
    "CHART_DEFAULT",
    "FAILED",
    "REFUSED",
    "VALUE",
    "Cause",
    "GatingKey",
    "cause_from_application",
    "gating_line",
    "parse_condition",
    "refusal_headline",
    "unwrap",
]

REFUSED = "render-refused"
"""driftguard's CMP refused the render (a guard)."""
FAILED = "render-failed"
"""Manifest generation failed for another reason (a helm error, another plugin, the repo)."""
CHART_DEFAULT = "chart-default"
VALUE = "value"
_ORIGIN = {CHART_DEFAULT: "relies on the chart default", VALUE: "is set by this environment"}
MAX_KEYS = 3
MAX_REASON = 300
MAX_KEY = 120
MAX_WHERE = 120

# read with match() once Argo CD's prefixes are stripped: the headline starts the CMP's stderr, so
# text a chart prints (helm's error, after "driftguard: error:" or indented below it) cannot pose as it
_HEAD = re.compile(r"driftguard: refused by (?P<guard>[a-z0-9][a-z0-9-]{0,39}): (?P<reason>.*)")
_KEY = re.compile(
    r"^driftguard: gating key `(?P<key>[^`\n]{1,400})` (?P<origin>"
    + "|".join(map(re.escape, _ORIGIN.values()))
    + r")(?: \((?P<where>[^()\n]{1,400})\))?[ \t]*$",
    re.M,
)
# Argo CD's wrapping, outermost first (controller/state.go, reposerver/repository/repository.go,
# cmpserver/plugin/plugin.go); stripped from a failure's first line to leave the tool's own words
_WRAP = re.compile(
    r"^(?:Failed to load target state: |Manifest generation error \(cached\): |"
    r"failed to generate manifest for source \d+ of \d+: |rpc error: code = \w+ desc = |"
    r"error generating manifests in cmp: |error generating manifests: |plugin sidecar failed\. |"
    r"`[^`\n]{0,400}` failed exit status \d+: )"
)


_LOADING = ("Failed to load target state: ", "Manifest generation error (cached): ")


class GatingKey(NamedTuple):
    """A values key that decides whether whole resources render, and where its value came from."""

    key: str
    origin: str
    """CHART_DEFAULT or VALUE."""
    where: str = ""
    """``template:line`` of the gate."""


def refusal_headline(guard: str, reason: str) -> str:
    """The CMP's first stderr line for a refusal."""
    return _one_line(f"driftguard: refused by {guard}: {reason}")


def gating_line(g: GatingKey) -> str:
    """The CMP's line naming one gating key (a backtick in the key would end it: shown as ')."""
    key = _one_line(g.key).replace("`", "'")
    at = _one_line(g.where).replace("(", "[").replace(")", "]")
    where = f" ({at})" if at else ""  # a place that is only whitespace ("\x85") is no place: no "()"
    return f"driftguard: gating key `{key}` {_ORIGIN[g.origin]}{where}"


@dataclass(frozen=True)
class Cause:
    """Why the render is not there: REFUSED (``guard``, ``reason``, ``keys``) or FAILED (``reason``)."""

    kind: str
    reason: str = ""
    guard: str = ""
    keys: tuple[GatingKey, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "guard": self.guard,
            "reason": self.reason,
            "keys": [k._asdict() for k in self.keys],
        }


def parse_condition(message: str) -> Cause | None:
    """The cause in one ComparisonError message, or None when it has no words to quote."""
    if not message or not message.strip():
        return None
    first = next((line for line in message.strip().splitlines() if line.strip()), "")
    # only a failure to load the target state leaves Argo CD without target objects (controller/state.go
    # sets failedToLoadObjs there); other ComparisonErrors (normalising, duplicates) are not a cause
    loading = first.startswith(_LOADING)
    while (m := _WRAP.match(first)) is not None:
        first = first[m.end() :]
    head = _HEAD.match(first)
    if head is not None:
        keys: list[GatingKey] = []
        origins = {v: k for k, v in _ORIGIN.items()}
        for m in _KEY.finditer(message):
            key = _bounded(m.group("key"), MAX_KEY)
            if key and all(k.key != key for k in keys):
                keys.append(
                    GatingKey(key, origins[m.group("origin")], _bounded(m.group("where") or "", MAX_WHERE))
                )
            if len(keys) == MAX_KEYS:
                break
        return Cause(REFUSED, _bounded(head.group("reason"), MAX_REASON), head.group("guard"), tuple(keys))
    reason = _bounded(first, MAX_REASON)
    return Cause(FAILED, reason) if reason and loading else None


def unwrap(message: str) -> str:
    """A ComparisonError's text with Argo CD's wrapping taken off its first line, every line break kept.

    A driftguard refusal then starts with the CMP's own ``driftguard: refused by ...`` line; any
    other failure (git, the repository, the cluster) with the failing tool's words.
    """
    lines = message.strip().splitlines()
    if not lines:
        return ""
    first = lines[0]
    while (m := _WRAP.match(first)) is not None:
        first = first[m.end() :]
    return "\n".join([first, *lines[1:]]).strip()


def cause_from_application(app: Mapping[str, Any]) -> Cause | None:
    """The first ComparisonError of ``status.conditions`` read as a cause (Argo CD's Application CRD)."""
    status = app.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    if not isinstance(conditions, list):
        return None
    for c in conditions:
        if isinstance(c, Mapping) and c.get("type") == "ComparisonError":
            cause = parse_condition(str(c.get("message") or ""))
            if cause is not None:
                return cause
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _bounded(text: str, limit: int) -> str:
    text = _one_line(scrub_text(text))
    return text if len(text) <= limit else text[: limit - 1] + "…"

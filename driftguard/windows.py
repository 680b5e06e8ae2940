"""Sync windows with Argo CD's semantics: a cron schedule that opens a window for a duration.

``{kind: allow|deny, schedule: "0 22 * * *", duration: "1h", applications: [...], namespaces:
[...], clusters: [...], timeZone: "Asia/Shanghai"}`` as in an AppProject's ``spec.syncWindows``.
A window is active at ``now`` when its schedule fired within the last ``duration`` (Argo CD asks
the cron for the next firing after ``now - duration`` and checks it is not after ``now``).
Applications, namespaces and clusters match by glob; a window with none of them matches nothing.
Syncs are frozen when a matching deny window is active, or when matching allow windows exist and
none is active.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from driftguard.errors import InputError

__all__ = ["Cron", "SyncWindow", "frozen", "parse_duration"]

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_NAMES = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
    "sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
}  # fmt: skip
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def parse_duration(text: str) -> timedelta:
    """Go's time.ParseDuration subset Argo CD users write: 1h, 30m, 1h30m, 90s, 2h0m0s."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|m|s)", text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise InputError(f"duration {text!r} is not like 1h, 30m or 1h30m")
    seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    return timedelta(seconds=seconds)


class Cron:
    """A standard 5-field cron spec (minute hour day-of-month month day-of-week), with descriptors."""

    def __init__(self, spec: str) -> None:
        text = _DESCRIPTORS.get(spec.strip(), spec.strip())
        fields = text.split()
        if len(fields) != 5:
            raise InputError(f"schedule {spec!r} must have 5 fields (minute hour day month weekday)")
        self.spec = spec
        self.sets = [self._field(f, lo, hi, spec) for f, (lo, hi) in zip(fields, _RANGES, strict=True)]
        self.dom_any = fields[2] == "*"
        self.dow_any = fields[4] == "*"

    @staticmethod
    def _field(text: str, lo: int, hi: int, spec: str) -> frozenset[int]:
        out: set[int] = set()
        for part in text.lower().split(","):
            step = 1
            if "/" in part:
                part, step_text = part.split("/", 1)
                if not step_text.isdigit() or int(step_text) == 0:
                    raise InputError(f"schedule {spec!r}: bad step {step_text!r}")
                step = int(step_text)
            if part in ("*", "?"):
                start, end = lo, hi
            elif "-" in part:
                a, b = part.split("-", 1)
                start, end = _num(a, spec), _num(b, spec)
            else:
                start = _num(part, spec)
                end = hi if step > 1 else start
            if hi == 6 and end == 7:  # Sunday as 7
                end = 6 if start <= 6 else 0
                out.add(0)
            if not (lo <= start <= hi and lo <= end <= hi and start <= end):
                raise InputError(f"schedule {spec!r}: {part!r} is out of range {lo}-{hi}")
            out.update(range(start, end + 1, step))
        return frozenset(out)

    def matches(self, t: datetime) -> bool:
        minute, hour, dom, month, dow = self.sets
        if t.minute not in minute or t.hour not in hour or t.month not in month:
            return False
        dom_ok = t.day in dom
        dow_ok = (t.isoweekday() % 7) in dow
        if self.dom_any or self.dow_any:  # cron: when one of them is restricted, it alone decides
            return dom_ok and dow_ok
        return dom_ok or dow_ok

    def fired_within(self, now: datetime, span: timedelta) -> datetime | None:
        """The latest firing in (now - span, now], or None."""
        t = now.replace(second=0, microsecond=0)
        earliest = now - span
        while t > earliest:
            if self.matches(t):
                return t
            t -= timedelta(minutes=1)
        return None


def _num(text: str, spec: str) -> int:
    if text.isdigit():
        return int(text)
    if text in _NAMES:
        return _NAMES[text]
    raise InputError(f"schedule {spec!r}: {text!r} is not a number")


@dataclass(frozen=True)
class SyncWindow:
    kind: str
    cron: Cron
    duration: timedelta
    applications: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    tz: ZoneInfo | None = None
    origin: str = ""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, origin: str) -> SyncWindow:
        kind = str(raw.get("kind", ""))
        if kind not in ("allow", "deny"):
            raise InputError(f"{origin}: kind must be allow or deny, got {kind!r}")
        tz = None
        if raw.get("timeZone"):
            try:
                tz = ZoneInfo(str(raw["timeZone"]))
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise InputError(f"{origin}: unknown time zone {raw['timeZone']!r}") from exc
        return cls(
            kind,
            Cron(str(raw.get("schedule", ""))),
            parse_duration(str(raw.get("duration", ""))),
            tuple(raw.get("applications") or ()),
            tuple(raw.get("namespaces") or ()),
            tuple(raw.get("clusters") or ()),
            tz,
            origin,
        )

    def applies_to(self, app: str, namespace: str, cluster: str) -> bool:
        def hit(patterns: tuple[str, ...], value: str) -> bool:
            return any(fnmatch.fnmatchcase(value, p) for p in patterns)

        return hit(self.applications, app) or hit(self.namespaces, namespace) or hit(self.clusters, cluster)

    def active(self, now: datetime) -> bool:
        local = now.astimezone(self.tz or UTC)
        return self.cron.fired_within(local, self.duration) is not None

    def describe(self) -> str:
        tz = f" {self.tz.key}" if self.tz else " UTC"
        return f"{self.kind} window '{self.cron.spec}' for {self.duration}{tz} ({self.origin})"


def frozen(
    windows: Iterable[SyncWindow], *, app: str, namespace: str, cluster: str, now: datetime
) -> list[str]:
    """Why syncs of this app are frozen now (empty: not frozen)."""
    matching = [w for w in windows if w.applies_to(app, namespace, cluster)]
    reasons = [f"inside the {w.describe()}" for w in matching if w.kind == "deny" and w.active(now)]
    allows = [w for w in matching if w.kind == "allow"]
    if allows and not any(w.active(now) for w in allows):
        reasons.append("outside every allow window: " + "; ".join(w.describe() for w in allows))
    return reasons

"""Sync windows with Argo CD's semantics: a cron schedule that opens a window for a duration.

``{kind: allow|deny, schedule: "0 22 * * *", duration: "1h", applications: [...], namespaces:
[...], clusters: [...], timeZone: "Asia/Shanghai", manualSync: bool, andOperator: bool,
syncOverrun: bool}`` as in an AppProject's ``spec.syncWindows``. Every rule here follows
argo-cd ``pkg/apis/application/v1alpha1/types.go`` (``SyncWindows.active``/``inactiveAllows``/
``Matches``/``CanSync``, ``SyncWindow.active``/``Validate``) and the cron parser it builds,
robfig/cron v3 ``parser.go`` with ``Minute | Hour | Dom | Month | Dow``:

- a schedule has exactly five fields; ``@daily`` and other descriptors are refused (no
  ``cron.Descriptor``); day-of-week is 0-6 (``7`` is out of range); a ``TZ=``/``CRON_TZ=`` prefix
  names the zone the fields are read in; a schedule or duration Argo CD cannot parse is an error;
- a window is active at ``now`` when the first firing *after* ``now - duration`` is strictly
  *before* ``now`` (``schedule.Next`` is exclusive and ``Before`` is strict): at its exact opening
  second a window is not active yet;
- applications, namespaces and clusters match by glob (gobwas, as app_project_types.go globMatch); a cluster pattern matches the destination's
  name or its server; by default any set list that matches selects the window (OR), with
  ``andOperator: true`` every set list must match; a window with none of them matches nothing;
- a sync may run unless a matching deny window is active, or matching allow windows exist and
  none is active; ``manualSync: true`` on *every* blocking window lets a manual sync through;
  ``syncOverrun: true`` on every blocking window lets an operation that started while syncs were
  allowed carry on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from driftguard import globs
from driftguard.errors import InputError

__all__ = ["Cron", "SyncWindow", "can_sync", "frozen", "parse_duration"]

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
_DOWS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
# (low, high, names) per field, robfig/cron's bounds
_BOUNDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 6, _DOWS),
)

# Go's time.ParseDuration units (time/format.go: unitMap)
_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_duration(text: str) -> timedelta:
    """Go's ``time.ParseDuration`` (what Argo CD reads ``duration`` with): ``1h``, ``1h30m``, ``90s``, ``1.5h``."""
    s = text
    sign = 1.0
    if s[:1] in ("+", "-"):
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return timedelta(0)
    if not s:
        raise InputError(f"duration {text!r} is not like 1h, 30m or 1h30m")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None:
            raise InputError(f"duration {text!r} is not like 1h, 30m or 1h30m")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return timedelta(seconds=sign * total)


class Cron:
    """A cron spec as robfig/cron parses it for Argo CD: exactly five fields, no descriptors."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        text = spec
        self.tz: ZoneInfo | None = None
        if not text:
            raise InputError("schedule is empty")
        if text.startswith(("TZ=", "CRON_TZ=")):
            space = text.find(" ")
            name = text[text.find("=") + 1 : space if space >= 0 else len(text)]
            try:
                self.tz = ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise InputError(f"schedule {spec!r}: unknown time zone {name!r}") from exc
            text = text[space:].strip() if space >= 0 else ""
        if text.startswith("@"):
            raise InputError(
                f"schedule {spec!r}: Argo CD's cron parser does not accept descriptors; write five fields"
            )
        fields = text.split()
        if len(fields) != 5:
            raise InputError(
                f"schedule {spec!r} must have exactly 5 fields (minute hour day month weekday), found {len(fields)}"
            )
        parsed = [self._field(f, bounds, spec) for f, bounds in zip(fields, _BOUNDS, strict=True)]
        self.sets = [p[0] for p in parsed]
        self.dom_star = parsed[2][1]
        self.dow_star = parsed[4][1]

    @staticmethod
    def _field(text: str, bounds: tuple[int, int, dict[str, int]], spec: str) -> tuple[frozenset[int], bool]:
        """The values of one field, and whether robfig marks it with its star bit."""
        lo, hi, names = bounds
        out: set[int] = set()
        star = False
        for expr in (p for p in text.split(",") if p):
            range_step = expr.split("/")
            if len(range_step) > 2:
                raise InputError(f"schedule {spec!r}: too many slashes in {expr!r}")
            low_high = range_step[0].split("-")
            extra = False
            if low_high[0] in ("*", "?"):
                start, end, extra = lo, hi, True
            else:
                if len(low_high) > 2:
                    raise InputError(f"schedule {spec!r}: too many hyphens in {expr!r}")
                start = _num(low_high[0], names, spec)
                end = _num(low_high[1], names, spec) if len(low_high) == 2 else start
            step = 1
            if len(range_step) == 2:
                step = _num(range_step[1], {}, spec)
                if len(low_high) == 1:
                    end = hi
                if step > 1:
                    extra = False
            if start < lo:
                raise InputError(f"schedule {spec!r}: {expr!r} starts below {lo}")
            if end > hi:
                raise InputError(f"schedule {spec!r}: {expr!r} ends above {hi}")
            if start > end:
                raise InputError(f"schedule {spec!r}: {expr!r} begins after it ends")
            if step == 0:
                raise InputError(f"schedule {spec!r}: the step in {expr!r} must be positive")
            out.update(range(start, end + 1, step))
            star = star or extra
        return frozenset(out), star

    def matches(self, t: datetime) -> bool:
        minute, hour, _dom, month, _dow = self.sets
        if t.minute not in minute or t.hour not in hour or t.month not in month:
            return False
        return self._day_matches(t)

    def fired_within(self, now: datetime, span: timedelta) -> datetime | None:
        """The latest firing strictly inside (now - span, now), or None: robfig's Next is exclusive
        of its start and Argo CD's ``Before`` is strict."""
        if self.tz is not None:
            now = now.astimezone(self.tz)
        earliest = now - span
        t = now.replace(second=0, microsecond=0)
        if t >= now:
            t -= timedelta(minutes=1)
        minute, hour, _dom, month, _dow = self.sets
        while t > earliest:
            # walk back a month, a day or an hour at a time where the fields cannot match
            if t.month not in month:
                t = t.replace(day=1, hour=23, minute=59) - timedelta(days=1)
            elif not self._day_matches(t):
                t = t.replace(hour=23, minute=59) - timedelta(days=1)
            elif t.hour not in hour:
                t = t.replace(minute=59) - timedelta(hours=1)
            elif t.minute in minute:
                return t
            else:
                t -= timedelta(minutes=1)
        return None

    def _day_matches(self, t: datetime) -> bool:
        """robfig: a star in either day field makes the two an AND, else an OR."""
        dom_ok = t.day in self.sets[2]
        dow_ok = (t.isoweekday() % 7) in self.sets[4]
        if self.dom_star or self.dow_star:
            return dom_ok and dow_ok
        return dom_ok or dow_ok


def _num(text: str, names: dict[str, int], spec: str) -> int:
    low = text.lower()
    if low in names:
        return names[low]
    digits = text[1:] if text.startswith("+") else text  # robfig uses strconv.Atoi
    if digits.isdigit():
        return int(digits)
    raise InputError(f"schedule {spec!r}: {text!r} is not a number")


def _strings(raw: Mapping[str, Any], name: str, origin: str) -> tuple[str, ...]:
    value = raw.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{origin}: {name} must be a list of strings")
    return tuple(value)


def _flag(raw: Mapping[str, Any], name: str, origin: str) -> bool:
    value = raw.get(name, False)
    if not isinstance(value, bool):
        raise InputError(f"{origin}: {name} must be true or false")
    return value


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
    manual_sync: bool = False
    """``manualSync``: a manual sync may run while this window would block it."""
    and_operator: bool = False
    """``andOperator``: every set list (applications, clusters, namespaces) must match."""
    sync_overrun: bool = False
    """``syncOverrun``: an operation started while syncs were allowed may carry on."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, origin: str) -> SyncWindow:
        kind = str(raw.get("kind", ""))
        if kind not in ("allow", "deny"):
            raise InputError(f"{origin}: kind must be allow or deny, got {kind!r}")
        tz = None
        if raw.get("timeZone"):
            try:
                tz = ZoneInfo(str(raw["timeZone"]))
            except (ZoneInfoNotFoundError, ValueError):
                # types.go scheduleOffsetByTimeZone/Validate: an unknown zone is UTC (with a warning)
                tz = None
                origin = f"{origin}, unknown timeZone {str(raw['timeZone'])[:64]!r} read as UTC"
        try:
            cron = Cron(str(raw.get("schedule", "")))
            duration = parse_duration(str(raw.get("duration", "")))
        except InputError as exc:
            raise InputError(f"{origin}: {exc}") from exc
        return cls(
            kind,
            cron,
            duration,
            _strings(raw, "applications", origin),
            _strings(raw, "namespaces", origin),
            _strings(raw, "clusters", origin),
            tz,
            origin,
            manual_sync=_flag(raw, "manualSync", origin),
            and_operator=_flag(raw, "andOperator", origin),
            sync_overrun=_flag(raw, "syncOverrun", origin),
        )

    def applies_to(self, app: str, namespace: str, cluster: str, *, server: str = "") -> bool:
        """Argo CD's ``SyncWindows.Matches``: ``cluster`` is the destination name, ``server`` its URL."""

        def hit(patterns: tuple[str, ...], *values: str) -> bool:
            return any(v != "" and globs.match(p, v) for p in patterns for v in values)

        checks = []
        if self.applications:
            checks.append(hit(self.applications, app))
        if self.clusters:
            checks.append(hit(self.clusters, cluster, server))
        if self.namespaces:
            # an empty destination namespace still meets a "*" (Argo globs it like any string)
            checks.append(any(globs.match(p, namespace) for p in self.namespaces))
        if not checks:
            return False
        return all(checks) if self.and_operator else any(checks)

    def active(self, now: datetime) -> bool:
        local = now.astimezone(self.tz or UTC)
        return self.cron.fired_within(local, self.duration) is not None

    def describe(self) -> str:
        tz = f" {self.tz.key}" if self.tz else " UTC"
        return f"{self.kind} window '{self.cron.spec}' for {self.duration}{tz} ({self.origin})"


def _blocking(windows: list[SyncWindow], now: datetime, *, manual: bool) -> list[str]:
    """Argo CD's ``canSyncAtTime`` over already-matched windows: why a sync is blocked at ``now``."""
    active = [w for w in windows if w.active(now)]
    denies = [w for w in active if w.kind == "deny"]
    if denies:
        if manual and all(w.manual_sync for w in denies):
            return []
        return [f"inside the {w.describe()}" for w in denies]
    if any(w.kind == "allow" for w in active):
        return []
    inactive_allows = [w for w in windows if w.kind == "allow"]
    if inactive_allows:
        if manual and all(w.manual_sync for w in inactive_allows):
            return []
        return ["outside every allow window: " + "; ".join(w.describe() for w in inactive_allows)]
    return []


def frozen(
    windows: Iterable[SyncWindow],
    *,
    app: str,
    namespace: str,
    cluster: str,
    now: datetime,
    server: str = "",
    manual: bool = False,
    operation_started: datetime | None = None,
) -> list[str]:
    """Why a sync of this app may not run now (empty: it may), as Argo CD's ``CanSync`` decides.

    ``cluster``/``server`` are the destination's name and URL; ``manual`` says the sync is a
    manual one (``manualSync`` windows let it through); ``operation_started`` is when a running
    sync began (``syncOverrun`` windows let it carry on if it was allowed then).
    """
    matching = [w for w in windows if w.applies_to(app, namespace, cluster, server=server)]
    reasons = _blocking(matching, now, manual=manual)
    if not reasons or operation_started is None:
        return reasons
    active = [w for w in matching if w.active(now)]
    denies = [w for w in active if w.kind == "deny"]
    # types.go CanSync: overrun needs syncOverrun on every deny window (active deny) or on every
    # allow window (no allow window active), and the sync must have been allowed when it started
    overrun_windows = denies if denies else [w for w in matching if w.kind == "allow"]
    if (
        overrun_windows
        and all(w.sync_overrun for w in overrun_windows)
        and not _blocking(matching, operation_started, manual=manual)
    ):
        return []
    return reasons


def can_sync(
    windows: Iterable[SyncWindow],
    *,
    app: str,
    namespace: str,
    cluster: str,
    now: datetime,
    server: str = "",
    manual: bool = False,
    operation_started: datetime | None = None,
) -> bool:
    """Argo CD's ``SyncWindows.Matches(app).CanSync(isManual, operationStartTime)``."""
    return not frozen(
        windows,
        app=app,
        namespace=namespace,
        cluster=cluster,
        now=now,
        server=server,
        manual=manual,
        operation_started=operation_started,
    )

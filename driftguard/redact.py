"""Secret values never leave the process.

Masked: Secret ``data``/``stringData`` values; any value under a key that looks sensitive
(password, token, secret, apikey, credentials, private key ...) in any kind; the ``value`` of a
``{name, value}`` item whose name looks sensitive (env vars); the last-applied annotation of
a Secret (it holds the data). Inside any string value: the userinfo of a URL
(``postgres://admin:***@db``), query values named like a credential (``?token=***``), the token part
of a webhook URL (``/services/…``, ``/hook/…``, ``/webhooks/…``), and sensitive keys of JSON or YAML
carried in the string (a ConfigMap's ``config.json``, an annotation) or of ``key=value`` lines. A mask
keeps a short salted hash so a reader still sees *that* a value changed, and whether two masked
values are equal, without learning either.

``scrub_text`` applies the string rules to free text (errors, log fields) with a plain ``***``.

Linear and bounded (issue 31): a string longer than ``MAX_TEXT`` is masked whole, unread. Every
pattern is possessive or anchored, so one regex call costs at most a constant times the text it
is given (no backtracking over a run of blanks: ``k: x`` + 32 KB of blanks + ``y`` took seconds);
the line rule runs once per line. Every pass charges what it reads to a :class:`Work` meter, a
text carried inside a text (YAML in a ConfigMap value, JSON in that) included; a text whose
nesting would cost more than ``WORK_FACTOR`` times its own length is masked whole instead of
being read again (nested block scalars made the work grow as length^1.5).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from driftguard.diff import FieldChange, ListSeg, Segment, dumps

__all__ = ["DEFAULT_SENSITIVE", "MAX_TEXT", "WORK_FACTOR", "Redactor", "Work", "scrub_text"]

DEFAULT_SENSITIVE = (
    r"(?i)(passw(or)?d|passphrase|secret|token|api[-_]?key|credential|private[-_]?key|access[-_]?key"
    r"|client[-_]?key|auth|bearer|cookie|session[-_]?key|connection[-_]?string|dsn|signing[-_]?key)"
)
# keys that name or point at a secret rather than hold one
_REFERENCE_SUFFIX = re.compile(r"(Name|Ref|Refs|Seconds|Path|Namespace)$")
# a container under one of these keys is a reference to a Secret (a volume source), not a value
_REFERENCE_CONTAINERS = frozenset({"secret"})
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MASK = "***"

# query parameters that carry a credential (AWS and Azure signatures, OAuth codes, API keys)
_QUERY_KEY = re.compile(
    r"(?i)(token|key|secret|passw(or)?d|pwd|signature|credential|auth|session)|^(sig|sign|code|x-amz-security-token)$"
)
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,15}+://[^\s\"'<>`]++")
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*+://)([^/?#@\s]*+)@")
_QUERY = re.compile(r"([?&;])([^=&;#\s]++)=([^&;#\s]*+)")
# a path segment after one of these is a webhook's secret (Slack /services/T/B/X, Feishu /hook/<id>,
# Discord /webhooks/<id>/<token>, Teams /webhookb2/..., Telegram /bot<token>)
_HOOK_SEGMENT = re.compile(r"(?i)^(hooks?|services|webhooks?|webhookb2|incomingwebhook|trigger)$")
_TOKENISH = re.compile(r"^(?=[^0-9]*+[0-9])(?=[^A-Za-z]*+[A-Za-z])[A-Za-z0-9_\-:]{24,}+$")
# key = value / key: value lines (properties, .env, flat YAML) and "key": "value" pairs; matched
# against one line at a time, the value's trailing blanks cut in Python (a lazy ``.*?`` followed
# by ``[ \t]*$`` was quadratic in a run of blanks)
_PAIR = re.compile(
    r"""([^\S\n]*+(?:-[^\S\n]++)?(?:export[^\S\n]++)?["']?)([A-Za-z0-9_.\-/]++)(["']?[^\S\n]*+[:=][^\S\n]*+)(?![|>][^\S\n]*+$)(\S.*+)"""
)
# key=value inside a line: command-line flags (--db-password=x), log text
_INLINE_PAIR = re.compile(r"(?<![\w.\-])([A-Za-z0-9_.\-]++)(=)([^\s&;,'\"]++)")
_JSON_PAIR = re.compile(
    r"""(["'])([A-Za-z0-9_.\-]++)\1([^\S\n]*+:[^\S\n]*+)(["'])((?:\\[^\n]|(?!\4)[^\\\n])*+)\4"""
)
_MAX_PARSE = 256 * 1024
MAX_TEXT = 256 * 1024
"""Longest string the text rules read; a longer one is masked whole."""
WORK_FACTOR = 12
"""Characters the rules may read per character of the outermost text (each pass reads it once)."""
_WORK_FLOOR = 4096
_YAML_ALIAS = re.compile(r"(^|[\s\[{,:-])[&*][^\s]")


@dataclass(frozen=True)
class Redactor:
    """Masks sensitive values; ``salt`` keeps the short hashes unguessable (random per process by default)."""

    salt: bytes = field(default_factory=lambda: os.urandom(16), repr=False)
    sensitive: str = DEFAULT_SENSITIVE

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rx", re.compile(self.sensitive))
        object.__setattr__(self, "_keys", {})

    def mask(self, value: Any) -> Any:
        """``***(sha256:abcd1234)`` for a value; None and Argo CD's own ``+++`` masks stay as they are."""
        if value is None:
            return None
        if isinstance(value, str) and value and set(value) == {"+"}:
            return value
        digest = hmac.new(self.salt, dumps(value).encode(), hashlib.sha256).hexdigest()[:8]
        return f"{MASK}(sha256:{digest})"

    def text(self, value: str, *, work: Work | None = None) -> str:
        """A string with the credentials it carries masked (URLs, embedded JSON/YAML, key=value lines).

        ``work``: the meter to charge (default: the enclosing text's, else a fresh one for this text).
        """
        outer = _WORK.get()
        if work is None and outer is not None:
            return _text(value, self.mask, self._structured, outer)
        meter = work or Work.for_text(value)
        token = _WORK.set(meter)
        try:
            return _text(value, self.mask, self._structured, meter)
        finally:
            _WORK.reset(token)

    def _structured(self, parsed: Any) -> Any:
        return self.value(parsed)

    def is_sensitive_key(self, key: str) -> bool:
        """A mapping key whose value must be masked."""
        cache: dict[str, bool] = self._keys  # type: ignore[attr-defined]
        hit = cache.get(key)
        if hit is None:
            hit = bool(self._rx.search(key)) and not _REFERENCE_SUFFIX.search(key)  # type: ignore[attr-defined]
            if len(cache) < 10_000:
                cache[key] = hit
        return hit

    def change(self, change: FieldChange, *, kind: str, group: str = "") -> FieldChange:
        """The change with every sensitive value in ``old`` and ``new`` masked."""
        if self._masks_path(change.segments, kind=kind, group=group):
            return replace(change, old=self._mask_deep(change.old), new=self._mask_deep(change.new))
        if kind == "Secret" and group == "" and not change.segments:
            return replace(
                change, old=self.value(change.old, kind=kind), new=self.value(change.new, kind=kind)
            )
        return replace(change, old=self.value(change.old), new=self.value(change.new))

    def _masks_path(self, segs: tuple[Segment, ...], *, kind: str, group: str) -> bool:
        keys = [s for s in segs if isinstance(s, str)]
        if kind == "Secret" and group == "" and segs and segs[0] in ("data", "stringData"):
            return True
        if kind == "Secret" and group == "" and keys[:3] == ["metadata", "annotations", _LAST_APPLIED]:
            return True
        last = len(keys) - 1
        if any(
            self.is_sensitive_key(k) and not (k in _REFERENCE_CONTAINERS and i < last)
            for i, k in enumerate(keys)
        ):
            return True
        # the value of an env-style {name: DB_PASSWORD, value: ...} item
        for i, seg in enumerate(segs):
            item = seg.item if isinstance(seg, ListSeg) else None
            if (
                isinstance(item, dict)
                and i + 1 < len(segs)
                and segs[i + 1] == "value"
                and self._sensitive_item(item)
            ):
                return True
        return False

    def value(self, value: Any, *, kind: str = "") -> Any:
        """A copy of a value (an object or part of one) with sensitive parts masked."""
        if kind == "Secret" and isinstance(value, dict):
            out = {k: v for k, v in value.items()}
            for section in ("data", "stringData"):
                if isinstance(out.get(section), dict):
                    out[section] = {k: self.mask(v) for k, v in out[section].items()}
            meta = out.get("metadata")
            if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
                ann = dict(meta["annotations"])
                if _LAST_APPLIED in ann:
                    ann[_LAST_APPLIED] = self.mask(ann[_LAST_APPLIED])
                out["metadata"] = {**meta, "annotations": ann}
            return self.value(out)
        if isinstance(value, dict):
            sensitive_item = self._sensitive_item(value)
            return {k: self._value_under(str(k), v, sensitive_item) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def _value_under(self, key: str, value: Any, sensitive_item: bool) -> Any:
        if key in _REFERENCE_CONTAINERS and isinstance(value, dict):
            return self.value(value)
        if self.is_sensitive_key(key) or (sensitive_item and key == "value"):
            return self._mask_deep(value)
        return self.value(value)

    def _sensitive_item(self, item: dict[str, Any]) -> bool:
        name = item.get("name")
        return isinstance(name, str) and "value" in item and bool(self._rx.search(name))  # type: ignore[attr-defined]

    def _mask_deep(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self._mask_deep(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._mask_deep(v) for v in value]
        return self.mask(value)


class Work:
    """Characters the text rules have read for one outermost text, against ``limit``."""

    __slots__ = ("limit", "spent")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0

    @classmethod
    def for_text(cls, text: str) -> Work:
        return cls(WORK_FACTOR * len(text) + _WORK_FLOOR)

    def charge(self, n: int) -> bool:
        """Count ``n`` characters read; False (and nothing counted) when that would pass the limit."""
        if self.spent + n > self.limit:
            return False
        self.spent += n
        return True


# the meter of the outermost text being read in this thread: a text nested in it (a JSON or YAML
# string inside a value) is charged to the same meter
_WORK: ContextVar[Work | None] = ContextVar("driftguard_redact_work", default=None)
_PASSES = 5
"""Passes over one text: the structure parse, URLs, lines, JSON pairs, inline pairs."""


def scrub_text(text: str, *, work: Work | None = None) -> str:
    """Free text (an error, a log field) with URL credentials and sensitive key=value pairs as ``***``."""
    return _text(text, lambda _: MASK, None, work or Work.for_text(text))


def _text(value: str, mask: Callable[[Any], Any], structured: Callable[[Any], Any] | None, work: Work) -> str:
    if not value or len(value) < 6:
        return value
    if len(value) > MAX_TEXT or not work.charge(_PASSES * len(value)):
        return str(mask(value))  # too long to read, or nested too deep to read again: all of it
    if structured is not None:
        parsed = _parse(value)
        if parsed is not None:
            try:
                masked = structured(parsed)
            except RecursionError:
                return str(mask(value))  # too deep to look into: all of it
            if masked != parsed:
                return json.dumps(masked, ensure_ascii=False, sort_keys=False)
    if "://" in value:
        value = _URL.sub(lambda m: _url(m.group(0), mask), value)
    if "=" in value or ":" in value:
        value = "\n".join(_line(line, mask) for line in value.split("\n"))
        value = _JSON_PAIR.sub(lambda m: _json_pair(m, mask), value)
    if "=" in value:
        value = _INLINE_PAIR.sub(lambda m: _inline_pair(m, mask), value)
    return value


def _line(line: str, mask: Callable[[Any], Any]) -> str:
    m = _PAIR.match(line)
    return _pair(m, mask) if m else line


def _parse(value: str) -> Any:
    """A JSON or YAML mapping/list carried in a string, or None."""
    head = value.lstrip()[:1]
    if head in ("{", "["):
        try:
            obj = json.loads(value)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, (dict, list)):
            return obj
    if "\n" not in value or ":" not in value or _YAML_ALIAS.search(value):
        return None  # anchors and aliases could expand without bound when walked
    from driftguard.manifests import safe_load

    try:
        obj = safe_load(value)
    except Exception:  # not YAML: the line rules still apply
        return None
    return obj if isinstance(obj, (dict, list)) else None


def _masked(value: str, mask: Callable[[Any], Any]) -> str:
    return str(mask(value))


def _url(url: str, mask: Callable[[Any], Any]) -> str:
    m = _USERINFO.match(url)
    if m:
        user, sep, password = m.group(2).partition(":")
        info = f"{user}:{_masked(password, mask)}" if sep else _masked(user, mask)
        url = m.group(1) + info + "@" + url[m.end() :]
    base, q, query = url.partition("?")
    scheme, slashes, rest = base.partition("://")
    host, slash, path = rest.partition("/")
    if path:
        segments = path.split("/")
        hide = False
        for i, seg in enumerate(segments):
            if hide and seg:
                segments[i] = _masked(seg, mask)
            elif seg.startswith("bot") and _TOKENISH.match(seg[3:] or "x"):
                segments[i] = "bot" + _masked(seg[3:], mask)
            elif _TOKENISH.match(seg):
                segments[i] = _masked(seg, mask)
            hide = hide or bool(_HOOK_SEGMENT.match(seg))
        base = f"{scheme}{slashes}{host}{slash}{'/'.join(segments)}"
    if q:
        query = _QUERY.sub(
            lambda p: (
                f"{p.group(1)}{p.group(2)}={_masked(p.group(3), mask)}"
                if _QUERY_KEY.search(p.group(2)) and p.group(3)
                else p.group(0)
            ),
            "?" + query,
        )[1:]
    return base + q + query


def _pair(m: re.Match[str], mask: Callable[[Any], Any]) -> str:
    key, rest = m.group(2), m.group(4)
    value = rest.rstrip()
    if not re.search(DEFAULT_SENSITIVE, key) or _REFERENCE_SUFFIX.search(key) or value.startswith(MASK):
        return m.group(0)
    blanks = rest[len(value) :]
    trail = ""
    if value.endswith(","):
        value, trail = value[:-1], ","
    quote = value[0] if value[:1] in "\"'" and value[-1:] == value[:1] and len(value) > 1 else ""
    inner = value[1:-1] if quote else value
    return f"{m.group(1)}{key}{m.group(3)}{quote}{_masked(inner, mask)}{quote}{trail}{blanks}"


def _json_pair(m: re.Match[str], mask: Callable[[Any], Any]) -> str:
    key = m.group(2)
    if not re.search(DEFAULT_SENSITIVE, key) or _REFERENCE_SUFFIX.search(key) or m.group(5).startswith(MASK):
        return m.group(0)
    return f"{m.group(1)}{key}{m.group(1)}{m.group(3)}{m.group(4)}{_masked(m.group(5), mask)}{m.group(4)}"


def _inline_pair(m: re.Match[str], mask: Callable[[Any], Any]) -> str:
    key, value = m.group(1).lstrip("-"), m.group(3)
    if not re.search(DEFAULT_SENSITIVE, key) or _REFERENCE_SUFFIX.search(key) or value.startswith(MASK):
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{_masked(value, mask)}"

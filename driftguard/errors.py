"""The error tree shared by every driftguard component.

::

    DriftguardError                 base: catch this to catch everything we raise
    ├── ConfigError                 a setting is missing or invalid (stops start-up, names the setting)
    ├── InputError                  outside input we refuse: a request, a file, a parameter
    │   └── ManifestError           a YAML/JSON manifest stream we cannot accept (file and line)
    │       └── LimitExceeded       size, document count, nesting depth or alias expansion over a limit
    ├── RenderError                 helm / kustomize failed (their stderr, trimmed)
    │   └── RenderTimeout           the renderer did not finish in time; its process group was killed
    ├── GuardRefusal                a guard refused a render (the CMP exits non-zero with it)
    ├── UpstreamError               an API we read from failed (Argo CD, kube-apiserver, Prometheus)
    │   ├── UpstreamUnavailable     down, 5xx, garbage: try again later
    │   │   ├── UpstreamTimeout     it did not answer in time
    │   │   └── Unauthorized        401/403: our token lacks a permission (fixable by a person; retried)
    │   └── NotFound                the thing asked for does not exist: a decided answer
    └── DeliveryError               sending an alert failed
        ├── Retryable               try again later (5xx, 429, timeouts); may carry retry_after seconds
        ├── Unconfirmed             sent, no answer in time: the receiver may have it, a resend may duplicate
        └── Permanent               will never succeed as sent (4xx, rejected payload): dead-letter it
    StoreUnavailable                (under DriftguardError) the outbox cannot take a write: not stored, try again

Temporary failures (``UpstreamUnavailable``, ``Retryable``) are the ones a caller retries; the
rest are final. Always raise these ``from`` the exception that caused them.
"""

from __future__ import annotations


class DriftguardError(Exception):
    """Base of every error driftguard raises on purpose."""


class ConfigError(DriftguardError):
    """A setting is missing or invalid; ``setting`` names it."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting = setting


class InputError(DriftguardError):
    """Outside input that we refuse with a clear message."""


class ManifestError(InputError):
    """A manifest stream we cannot accept; ``source`` and ``line`` (1-based) locate it when known."""

    def __init__(self, message: str, *, source: str = "<input>", line: int | None = None) -> None:
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")
        self.source = source
        self.line = line
        self.reason = message


class LimitExceeded(ManifestError):
    """Input over a configured limit (size, documents, depth, alias expansion)."""


class RenderError(DriftguardError):
    """A renderer (helm, kustomize) failed; ``stderr`` holds its trimmed output."""

    def __init__(self, message: str, *, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


class RenderTimeout(RenderError):
    """A renderer ran past its deadline and was killed."""


class GuardRefusal(DriftguardError):
    """A guard refused a render: ``guard`` names it, ``details`` and ``fix`` explain it."""

    def __init__(
        self,
        guard: str,
        reason: str,
        *,
        details: list[str] | None = None,
        fix: str = "",
        gating: list[tuple[str, str, str]] | None = None,
    ) -> None:
        super().__init__(f"refused by {guard}: {reason}")
        self.guard = guard
        self.reason = reason
        self.details = details or []
        self.fix = fix
        self.gating = gating or []
        """(key, origin, template:line) of the values keys behind it (driftguard.cause.GatingKey)."""


class UpstreamError(DriftguardError):
    """An API we read from failed."""


class UpstreamUnavailable(UpstreamError):
    """The upstream is down, slow or answered garbage: temporary."""


class UpstreamTimeout(UpstreamUnavailable):
    """The upstream did not answer in time."""


class Unauthorized(UpstreamUnavailable):
    """The upstream refused our credentials (401) or a permission (403); ``permission`` names what is needed."""

    def __init__(self, message: str, *, permission: str = "") -> None:
        super().__init__(message)
        self.permission = permission


class NotFound(UpstreamError):
    """The upstream says the object does not exist."""


class DeliveryError(DriftguardError):
    """Sending an alert failed."""


class Retryable(DeliveryError):
    """A temporary delivery failure; ``retry_after`` is the receiver's hint in seconds, if any."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unconfirmed(DeliveryError):
    """The request went out but no answer came in time: the receiver may have taken it."""


class Permanent(DeliveryError):
    """A delivery that will never succeed as sent."""


class StoreUnavailable(DriftguardError):
    """The durable store (the notifier's outbox) cannot take a write: nothing was stored, try again."""

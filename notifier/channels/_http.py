"""The only outbound HTTP path of the notifier: timeouts, proxies from the environment, one attempt.

Retries belong to the outbox (backoff with jitter, Retry-After); this module sends once and turns
every outcome into success, Retryable, Unconfirmed (sent, no answer: resent only to an idempotent
receiver) or Permanent. Receiver URLs and tokens are secrets: errors
carry the channel's name and a truncated body, never the URL.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

from driftguard.errors import Permanent, Retryable, Unconfirmed
from notifier.channels.base import Channel

__all__ = ["HttpSender", "retry_after", "snippet", "status_check"]


def snippet(body: bytes, limit: int = 200) -> str:
    """A short, single-line piece of an upstream body for an error message."""
    text = body[: limit * 4].decode("utf-8", errors="replace").replace("\n", " ").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), if any."""
    raw = headers.get("Retry-After") or headers.get("retry-after")
    if not raw:
        return None
    raw = raw.strip()
    if raw.isdigit():
        return float(raw)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def status_check(name: str, status: int, headers: Mapping[str, str], body: bytes) -> None:
    """What every receiver means by its status code: 2xx ok, 408/429/5xx retry, other 4xx permanent."""
    if 200 <= status < 300:
        return
    if status in (408, 425, 429) or status >= 500:
        raise Retryable(f"{name}: HTTP {status}: {snippet(body)}", retry_after=retry_after(headers))
    raise Permanent(f"{name}: HTTP {status}: {snippet(body)}")


class HttpSender:
    """One requests.Session for every channel of a process."""

    def __init__(self, *, connect_timeout: float = 3.05, read_timeout: float = 10.0) -> None:
        import requests

        self._session = requests.Session()
        self._session.headers["User-Agent"] = "driftguard-notifier"
        self.timeout = (connect_timeout, read_timeout)

    def send(self, channel: Channel, payload: dict[str, Any]) -> None:
        """Deliver one message; Retryable or Permanent when the receiver did not take it."""
        import requests

        out = channel.prepare(payload)
        try:
            resp = self._session.request(
                out.method,
                out.url,
                data=out.body,
                headers=dict(out.headers),
                timeout=self.timeout,
                allow_redirects=False,
            )
        except requests.ConnectTimeout as exc:
            raise Retryable(f"{channel.name}: connect timed out") from exc
        except requests.ReadTimeout as exc:
            # sent, unanswered: only a receiver that deduplicates may be asked again
            if getattr(channel, "idempotent", False):
                raise Retryable(f"{channel.name}: no answer within {self.timeout[1]:g} s") from exc
            raise Unconfirmed(
                f"{channel.name}: no answer within {self.timeout[1]:g} s; not resent (the receiver may have it)"
            ) from exc
        except requests.RequestException as exc:
            raise Retryable(f"{channel.name}: connection failed ({type(exc).__name__})") from exc
        channel.check(resp.status_code, resp.headers, resp.content[:65536])

    def close(self) -> None:
        self._session.close()

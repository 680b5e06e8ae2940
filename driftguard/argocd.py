"""Argo CD API client: the Application and its managed resources, with timeouts and retries.

``GET /api/v1/applications/{name}?appNamespace=`` and
``GET /api/v1/applications/{applicationName}/managed-resources?appNamespace=`` (shapes checked
against Argo CD v3.5.1's swagger.json). 5xx and connection errors are retried with backoff, then
raise UpstreamUnavailable; 404 raises NotFound. 401 and 403 raise Unauthorized naming the RBAC
permission the token needs: a 403 is Argo CD's RBAC saying no (``permission denied``), an install
mistake to be told about and retried, never "the app is gone".
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from driftguard.env import boolean, from_env
from driftguard.errors import ConfigError, NotFound, Unauthorized, UpstreamTimeout, UpstreamUnavailable

__all__ = ["ArgoCDClient", "ArgoCDSettings", "ManagedResource"]


class ManagedResource(TypedDict, total=False):
    """One item of the managed-resources answer (v1alpha1ResourceDiff): states are JSON strings."""

    group: str
    kind: str
    namespace: str
    name: str
    targetState: str
    liveState: str
    normalizedLiveState: str
    predictedLiveState: str
    hook: bool
    modified: bool
    resourceVersion: str


@dataclass(frozen=True)
class ArgoCDSettings:
    """How to reach Argo CD's API (DRIFTGUARD_ARGOCD_*)."""

    url: str = ""
    """Base URL, e.g. https://argocd-server.argocd.svc (DRIFTGUARD_ARGOCD_URL)."""
    token: str = field(default="", repr=False)
    """Bearer token of an account with `applications, get` (DRIFTGUARD_ARGOCD_TOKEN)."""
    ca_file: str = ""
    """CA bundle for the server certificate (DRIFTGUARD_ARGOCD_CA_FILE)."""
    insecure: bool = False
    """Skip TLS verification (DRIFTGUARD_ARGOCD_INSECURE): for a lab, never for production."""
    timeout: float = 5.0
    """Seconds per request (DRIFTGUARD_ARGOCD_TIMEOUT)."""
    retries: int = 2
    """Extra attempts on 5xx and connection errors (DRIFTGUARD_ARGOCD_RETRIES)."""
    namespace: str = "argocd"
    """Argo CD's control-plane namespace (DRIFTGUARD_ARGOCD_NAMESPACE)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ArgoCDSettings:
        settings = cls(**from_env(env, ENV))
        settings.validate()
        return settings

    def validate(self) -> None:
        if not self.url:
            raise ConfigError(
                "DRIFTGUARD_ARGOCD_URL",
                "is required (the Argo CD API, e.g. https://argocd-server.argocd.svc)",
            )
        if not self.url.startswith(("https://", "http://")):
            raise ConfigError("DRIFTGUARD_ARGOCD_URL", f"must be an http(s) URL, got {self.url!r}")
        if not self.token:
            raise ConfigError(
                "DRIFTGUARD_ARGOCD_TOKEN", "is required (an account token with `applications, get`)"
            )
        if self.timeout <= 0:
            raise ConfigError("DRIFTGUARD_ARGOCD_TIMEOUT", "must be greater than 0")


ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    "DRIFTGUARD_ARGOCD_URL": ("url", str),
    "DRIFTGUARD_ARGOCD_TOKEN": ("token", str),
    "DRIFTGUARD_ARGOCD_CA_FILE": ("ca_file", str),
    "DRIFTGUARD_ARGOCD_NAMESPACE": ("namespace", str),
    "DRIFTGUARD_ARGOCD_INSECURE": ("insecure", boolean),
    "DRIFTGUARD_ARGOCD_TIMEOUT": ("timeout", float),
    "DRIFTGUARD_ARGOCD_RETRIES": ("retries", int),
}


class ArgoCDClient:
    """A small, typed client; one requests.Session per instance."""

    def __init__(self, settings: ArgoCDSettings) -> None:
        import requests

        settings.validate()
        self.settings = settings
        self._session = requests.Session()
        self._session.headers["Authorization"] = f"Bearer {settings.token}"
        self._session.headers["Accept"] = "application/json"
        self._verify: bool | str = False if settings.insecure else (settings.ca_file or True)

    def application(self, name: str, app_namespace: str = "") -> dict[str, Any]:
        """The Application object."""
        namespace = app_namespace or self.settings.namespace
        body = self._get(
            f"/api/v1/applications/{name}",
            {"appNamespace": namespace},
            what=f"Application {name}",
            permission="applications, get",
        )
        meta = body.get("metadata") if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(meta, dict) or not isinstance(body.get("spec"), dict):
            raise UpstreamUnavailable(f"Argo CD answered something that is not an Application for {name}")
        # an answer about another object is an upstream fault, never an alert under its name
        got = (meta.get("namespace") or namespace, meta.get("name"))
        if got != (namespace, name):
            raise UpstreamUnavailable(
                f"Argo CD answered Application {str(got[0])[:63]}/{str(got[1])[:253]} when asked for {namespace}/{name}"
            )
        app: dict[str, Any] = body
        return app

    def project(self, name: str) -> dict[str, Any]:
        """The AppProject object (its spec.syncWindows)."""
        body = self._get(f"/api/v1/projects/{name}", {}, what=f"AppProject {name}")
        if not isinstance(body, dict) or "metadata" not in body:
            raise UpstreamUnavailable(f"Argo CD answered something that is not an AppProject for {name}")
        return body

    def managed_resources(self, name: str, app_namespace: str = "") -> list[ManagedResource]:
        """The managed-resources items (target, live, normalized and predicted states)."""
        body = self._get(
            f"/api/v1/applications/{name}/managed-resources",
            {"appNamespace": app_namespace or self.settings.namespace},
            what=f"managed resources of {name}",
            permission="applications, get",
        )
        items = body.get("items") if isinstance(body, dict) else None
        if items is None:
            return []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise UpstreamUnavailable(f"Argo CD answered malformed managed resources for {name}")
        return items

    def _get(self, path: str, params: dict[str, str], *, what: str, permission: str = "") -> Any:
        import requests

        url = self.settings.url.rstrip("/") + path
        last = ""
        timed_out = False
        params = {k: v for k, v in params.items() if v}
        for attempt in range(self.settings.retries + 1):
            if attempt:
                time.sleep(min(2.0, 0.2 * 2**attempt) * (0.5 + random.random() / 2))  # noqa: S311 - jitter
            try:
                resp = self._session.get(
                    url, params=params, timeout=self.settings.timeout, verify=self._verify
                )
            except requests.RequestException as exc:
                last = f"{type(exc).__name__}"
                timed_out = isinstance(exc, requests.Timeout)
                continue
            if resp.status_code == 404:
                raise NotFound(f"{what}: not found in Argo CD (HTTP 404)")
            if resp.status_code in (401, 403):
                need = f"; the account needs `{permission}` in argocd-rbac-cm" if permission else ""
                refused = "the token" if resp.status_code == 401 else "the request"
                raise Unauthorized(
                    f"{what}: Argo CD refused {refused} (HTTP {resp.status_code}){need}",
                    permission=permission,
                )
            if resp.status_code >= 500 or resp.status_code == 429:
                last = f"HTTP {resp.status_code}"
                timed_out = False
                continue
            if resp.status_code != 200:
                raise UpstreamUnavailable(f"{what}: Argo CD answered HTTP {resp.status_code}")
            try:
                return resp.json()
            except ValueError as exc:
                raise UpstreamUnavailable(f"{what}: Argo CD answered something that is not JSON") from exc
        error = UpstreamTimeout if timed_out else UpstreamUnavailable
        raise error(f"{what}: Argo CD unreachable after {self.settings.retries + 1} attempt(s) ({last})")

    def close(self) -> None:
        self._session.close()

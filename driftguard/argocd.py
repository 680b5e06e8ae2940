"""Argo CD API client: the Application and its managed resources, with timeouts and retries.

``GET /api/v1/applications/{name}?appNamespace=`` and
``GET /api/v1/applications/{applicationName}/managed-resources?appNamespace=`` (shapes checked
against Argo CD v3.5.1's swagger.json). 5xx and connection errors are retried with backoff, then
raise UpstreamUnavailable; 404 raises NotFound. 401 and 403 raise Unauthorized (a kind of
UpstreamUnavailable: retried, never "the app is gone") naming the RBAC permission the token needs: a
403 is Argo CD's RBAC saying no (``permission denied``), an install mistake to be told about.
Every answer is checked to be the object asked for before it is returned, and each attempt is one
total deadline (``driftguard.upstream``), never a per-read timeout a trickling server can stretch.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from driftguard import upstream
from driftguard.env import boolean, from_env, secret
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
    """Bearer token of an account with `applications, get` (DRIFTGUARD_ARGOCD_TOKEN, or a file named by
    DRIFTGUARD_ARGOCD_TOKEN_FILE)."""
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
        """Read once by every component that talks to Argo CD (the notifier, ``driftguard-cmp diff --live``)."""
        kw = from_env(env, ENV)
        token = secret(env, "DRIFTGUARD_ARGOCD_TOKEN")
        if token:
            kw["token"] = token
        settings = cls(**kw)
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
                "DRIFTGUARD_ARGOCD_TOKEN",
                "is required, or DRIFTGUARD_ARGOCD_TOKEN_FILE (an account token with `applications, get`)",
            )
        if self.timeout <= 0:
            raise ConfigError("DRIFTGUARD_ARGOCD_TIMEOUT", "must be greater than 0")


ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    "DRIFTGUARD_ARGOCD_URL": ("url", str),
    "DRIFTGUARD_ARGOCD_CA_FILE": ("ca_file", str),
    "DRIFTGUARD_ARGOCD_NAMESPACE": ("namespace", str),
    "DRIFTGUARD_ARGOCD_INSECURE": ("insecure", boolean),
    "DRIFTGUARD_ARGOCD_TIMEOUT": ("timeout", float),
    "DRIFTGUARD_ARGOCD_RETRIES": ("retries", int),
}


def _check_object(body: Any, what: str, *, name: str, namespace: str | None = None) -> None:
    """The answer is an object whose metadata names what was asked: a proxy's or a wrong route's answer is not."""
    if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
        raise UpstreamUnavailable(f"Argo CD answered something that is not an {what} (no metadata object)")
    meta = body["metadata"]
    if meta.get("name") != name:
        raise UpstreamUnavailable(
            f"Argo CD answered an object named {str(meta.get('name'))[:80]!r} when asked for {what}"
        )
    if namespace is not None and meta.get("namespace") != namespace:
        raise UpstreamUnavailable(
            f"Argo CD answered {what} in namespace {str(meta.get('namespace'))[:80]!r}, asked for {namespace!r}"
        )


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

    def application(
        self, name: str, app_namespace: str = "", *, deadline: float | None = None
    ) -> dict[str, Any]:
        """The Application object, checked to be the one asked for (name, namespace, an object ``status``)."""
        namespace = app_namespace or self.settings.namespace
        what = f"Application {name}"
        body = self._get(
            f"/api/v1/applications/{name}",
            {"appNamespace": namespace},
            what=what,
            deadline=deadline,
            permission="applications, get",
        )
        # an answer about another object is an upstream fault, never an alert under its name
        _check_object(body, what, name=name, namespace=namespace)
        # ApplicationStatus is a struct with omitempty, which Go's encoding/json never omits
        # (argo-cd pkg/apis/application/v1alpha1/types.go, Application): a missing status is not Argo CD
        for part in ("spec", "status"):
            if not isinstance(body.get(part), dict):
                raise UpstreamUnavailable(f"Argo CD answered an {what} without an object {part}")
        return body  # type: ignore[no-any-return]

    def project(self, name: str, *, deadline: float | None = None) -> dict[str, Any]:
        """The AppProject object (its spec.syncWindows), checked to be the one asked for."""
        what = f"AppProject {name}"
        body = self._get(
            f"/api/v1/projects/{name}", {}, what=what, deadline=deadline, permission="projects, get"
        )
        _check_object(body, what, name=name)
        spec = body.get("spec", {})
        if not isinstance(spec, dict):
            raise UpstreamUnavailable(f"Argo CD answered an {what} whose spec is not an object")
        if not isinstance(spec.get("syncWindows", []), list | None):
            raise UpstreamUnavailable(f"Argo CD answered an {what} whose spec.syncWindows is not a list")
        return body  # type: ignore[no-any-return]

    def managed_resources(
        self, name: str, app_namespace: str = "", *, deadline: float | None = None
    ) -> list[ManagedResource]:
        """The managed-resources items (target, live, normalized and predicted states)."""
        what = f"managed resources of {name}"
        body = self._get(
            f"/api/v1/applications/{name}/managed-resources",
            {"appNamespace": app_namespace or self.settings.namespace},
            what=what,
            deadline=deadline,
            permission="applications, get",
        )
        if not isinstance(body, dict):
            raise UpstreamUnavailable(f"Argo CD answered {what} that are not an object with items")
        # items is omitempty (argo-cd pkg/apiclient/application/application.pb.go,
        # ManagedResourcesResponse): an app that manages nothing answers {}
        items = body.get("items")
        if items is None:
            return []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise UpstreamUnavailable(f"Argo CD answered {what} whose items are not a list of objects")
        return items

    def _get(
        self,
        path: str,
        params: dict[str, str],
        *,
        what: str,
        deadline: float | None = None,
        permission: str = "",
    ) -> Any:
        """One answer's JSON; ``deadline`` (time.monotonic()) bounds every attempt and the pauses between them."""
        url = self.settings.url.rstrip("/") + path
        last = ""
        timed_out = False
        params = {k: v for k, v in params.items() if v}
        for attempt in range(self.settings.retries + 1):
            if attempt:
                pause = min(2.0, 0.2 * 2**attempt) * (0.5 + random.random() / 2)  # noqa: S311 - jitter
                if deadline is not None and time.monotonic() + pause >= deadline:
                    break
                time.sleep(pause)
            until = time.monotonic() + self.settings.timeout
            if deadline is not None:
                until = min(until, deadline)
            try:
                resp = upstream.get(
                    self._session,
                    url,
                    who=f"Argo CD ({what})",
                    deadline=until,
                    params=params,
                    verify=self._verify,
                )
            except UpstreamUnavailable as exc:
                last = str(exc)
                timed_out = isinstance(exc, UpstreamTimeout)
                continue
            if resp.status == 404:
                raise NotFound(f"{what}: not found in Argo CD (HTTP 404)")
            if resp.status in (401, 403):
                need = f"; the account needs `{permission}` in argocd-rbac-cm" if permission else ""
                refused = "the token" if resp.status == 401 else "the request"
                raise Unauthorized(
                    f"{what}: Argo CD refused {refused} (HTTP {resp.status}){need}",
                    permission=permission,
                )
            if resp.status >= 500 or resp.status == 429:
                last = f"HTTP {resp.status}"
                timed_out = False
                continue
            if resp.status != 200:
                raise UpstreamUnavailable(f"{what}: Argo CD answered HTTP {resp.status}")
            try:
                return upstream.strict_json(resp.body)
            except ValueError as exc:
                kind = resp.content_type.split(";")[0] or "no content type"
                raise UpstreamUnavailable(
                    f"{what}: Argo CD answered something that is not JSON ({kind}, {len(resp.body)} bytes)"
                ) from exc
        error = UpstreamTimeout if timed_out else UpstreamUnavailable
        raise error(f"{what}: Argo CD unreachable after {attempt + 1} attempt(s) ({last})")

    def close(self) -> None:
        self._session.close()

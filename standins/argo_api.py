"""A local HTTP server that answers like the kube-apiserver and the Argo CD API for Applications.

Shapes follow tests/reference (Application CRD, Argo CD swagger); tests validate the objects
they store against the CRD. It is a stand-in for what cannot run here, never a patch of our code.
"""

from __future__ import annotations

import json
import re
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

from standins.faults import Fault, send
from standins.http import running

KUBE_APP = re.compile(r"^/apis/argoproj\.io/v1alpha1/namespaces/([^/]+)/applications/([^/]+)$")
ARGO_APP = re.compile(r"^/api/v1/applications/([^/]+)$")
ARGO_MANAGED = re.compile(r"^/api/v1/applications/([^/]+)/managed-resources$")
ARGO_PROJECT = re.compile(r"^/api/v1/projects/([^/]+)$")


@dataclass
class FakeArgo:
    """Applications by (namespace, name), managed-resources answers by (namespace, name), and what was asked."""

    token: str = "test-token"
    apps: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    managed: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    projects: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    fail_with: int | None = None
    fail_until: float = 0.0
    """With ``fail_with``: fail only until this time.time() (0: until cleared)."""
    app_answer: Any = None
    """Served instead of every Application (a wrong-shape or wrong-name answer) while set."""
    delay: float = 0.0
    url: str = ""
    faults: dict[str, Fault] = field(default_factory=dict)
    """Misbehave per route: ``application``, ``managed-resources``, ``project``, or ``*`` for every Argo CD route."""

    def fail_for(self, status: int, seconds: float) -> None:
        """Answer ``status`` (403 as Argo CD's RBAC does, 503, ...) for the next ``seconds``."""
        import time

        self.fail_until = time.time() + seconds
        self.fail_with = status

    def put(self, app: dict[str, Any]) -> None:
        self.apps[(app["metadata"]["namespace"], app["metadata"]["name"])] = app


def application(
    name: str,
    *,
    namespace: str = "argocd",
    resources: list[tuple[str, str, str, str]] = (),  # type: ignore[assignment]
    annotations: dict[str, str] | None = None,
    sync: str = "Synced",
    health: str = "Healthy",
    dest_namespace: str = "default",
) -> dict[str, Any]:
    """An Application as the API returns it, with status.resources from (group, kind, namespace, name)."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": annotations or {},
            "resourceVersion": "42",
            "uid": "7d0c6a6e-0000-4000-8000-000000000001",
        },
        "spec": {
            "project": "default",
            "source": {
                "repoURL": "https://git.example.com/platform/gitops.git",
                "path": "charts/payment",
                "targetRevision": "main",
                "plugin": {"name": "driftguard"},
            },
            "destination": {"server": "https://kubernetes.default.svc", "namespace": dest_namespace},
        },
        "status": {
            "sync": {"status": sync, "revision": "0123456789abcdef0123456789abcdef01234567"},
            "health": {"status": health},
            "resources": [
                {
                    "group": g,
                    "version": "v1",
                    "kind": k,
                    "namespace": ns,
                    "name": n,
                    "status": sync,
                    "health": {"status": health},
                }
                for g, k, ns, n in resources
            ],
        },
    }


class _Handler(BaseHTTPRequestHandler):
    fake: FakeArgo
    # HTTP/1.1 keep-alive with Nagle off, as the real services' servers (Go net/http, nginx) answer:
    # an HTTP/1.0 stand-in made every request a new connection and a new thread, which the real
    # receivers never cost a client that keeps its connections
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        return

    fault: Fault | None = None

    def _send(self, code: int, body: dict[str, Any]) -> None:
        send(self, code, body, self.fault)

    def _answer(self, found: dict[str, Any] | None, what: str, *, kube: bool = False) -> None:
        """200 with the object, or 404 as the kube-apiserver (a Status) or Argo CD (a gRPC-gateway error) says it."""
        if found is not None:
            self._send(200, found)
        elif kube:
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "NotFound",
                "code": 404,
            }
            self._send(404, {**status, "message": f"{what} not found"})
        else:
            self._send(404, {"error": "not found", "code": 5, "message": f"{what} not found"})

    def do_GET(self) -> None:
        fake = self.fake
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        fake.requests.append((url.path, self.headers.get("Authorization", ""), query))
        route = (
            "project"
            if ARGO_PROJECT.match(url.path)
            else "managed-resources"
            if ARGO_MANAGED.match(url.path)
            else "application"
            if ARGO_APP.match(url.path)
            else "kube"
        )
        self.fault = fake.faults.get(route) or (fake.faults.get("*") if route != "kube" else None)
        if fake.delay:
            time.sleep(fake.delay)
        if fake.fail_with and (not fake.fail_until or time.time() < fake.fail_until):
            if fake.fail_with == 403:  # Argo CD's RBAC answer (gRPC PermissionDenied through the gateway)
                self._send(403, {"error": "permission denied", "code": 7, "message": "permission denied"})
            else:
                self._send(
                    fake.fail_with, {"error": "injected failure", "code": 13, "message": "injected failure"}
                )
            return
        if self.headers.get("Authorization") != f"Bearer {fake.token}":
            self._send(
                401,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "Unauthorized",
                    "code": 401,
                },
            )
            return
        ns = query.get("appNamespace", "argocd")
        m = KUBE_APP.match(url.path)
        if m:
            self._answer(
                fake.apps.get((m.group(1), m.group(2))), f'applications.argoproj.io "{m.group(2)}"', kube=True
            )
            return
        m = ARGO_PROJECT.match(url.path)
        if m:
            default = {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "AppProject",
                "metadata": {"name": "default", "namespace": "argocd"},
                "spec": {},
            }
            found = fake.projects.get(m.group(1)) or (default if m.group(1) == "default" else None)
            self._answer(found, f'appprojects.argoproj.io "{m.group(1)}"')
            return
        m = ARGO_MANAGED.match(url.path)
        if m:
            self._answer(fake.managed.get((ns, m.group(1))), f'applications.argoproj.io "{m.group(1)}"')
            return
        m = ARGO_APP.match(url.path)
        if m and fake.app_answer is not None:
            self._send(200, fake.app_answer)
            return
        if m:
            self._answer(fake.apps.get((ns, m.group(1))), f'applications.argoproj.io "{m.group(1)}"')
            return
        self._send(404, {"error": "no such route", "code": 5})


@contextmanager
def serve(fake: FakeArgo | None = None, *, tls: ssl.SSLContext | None = None) -> Iterator[FakeArgo]:
    """Run the stand-in on 127.0.0.1 on a free port (over TLS with ``tls``) for the duration of the block."""
    fake = fake or FakeArgo()
    with running(type("Handler", (_Handler,), {"fake": fake}), tls=tls) as url:
        fake.url = url
        yield fake


def kubeconfig(url: str, token: str) -> str:
    """A kubeconfig pointing the real kubernetes client at the stand-in."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": url}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "c", "context": {"cluster": "fake", "user": "u"}}],
            "current-context": "c",
        }
    )

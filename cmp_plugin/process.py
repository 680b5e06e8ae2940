"""Run a render tool: argv only (never a shell), in the plugin's process group, a deadline, caps.

The tool is started with ``os.posix_spawn`` (``spawn.spawn``) rather than ``subprocess``: generate
starts helm before anything else, and ``subprocess`` is ~5 ms of imports on that path. posix_spawn
cannot change directory, so tools get absolute paths and run in our working directory.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import time
from _thread import get_ident
from collections.abc import Mapping
from pathlib import Path

from cmp_plugin.memory import effective_cap, tree_rss
from cmp_plugin.spawn import kill_tree, spawn
from driftguard.errors import RenderError, RenderTimeout

__all__ = ["ToolRun", "run_tool", "tool_env", "trim"]

RSS_INTERVAL = 0.02
"""Seconds between two measurements of the render's resident memory while a tool runs."""

RENDER_DEADLINE: list[tuple[int, float]] = []
"""(thread, time.monotonic() deadline) of the render that thread runs under pipeline.deadline:
no tool it starts runs past it. Else a tool started late in the render (a loaded machine, a
second tool) had its own deadline after the render's alarm, and was stopped by the alarm as
"the render did not finish" instead of by name."""
# a forked child has no alarm (timers are not inherited) and runs renders of its own
os.register_at_fork(after_in_child=RENDER_DEADLINE.clear)

MAX_STDERR_CHUNKS = 16
"""Reads of stderr kept (at most 64 KiB each): a tool that floods stderr cannot fill memory."""

_PASS_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)


def tool_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment for a render tool: nothing user-controlled, homes under ``home``."""
    env = {k: v for k, v in os.environ.items() if k in _PASS_ENV}
    # Go collects before its heap reaches the render's cap (cmp_plugin/memory.py), a quarter left
    # for the plugin itself and what Go keeps outside the heap
    env.update(
        {
            "GOMEMLIMIT": str(effective_cap(os.environ) * 3 // 4),
            "HOME": str(home),
            "TMPDIR": str(home),
            "HELM_CACHE_HOME": str(home / "helm-cache"),
            "HELM_CONFIG_HOME": str(home / "helm-config"),
            "HELM_DATA_HOME": str(home / "helm-data"),
            "KUBECONFIG": str(home / "no-kubeconfig"),
        }
    )
    env.update(extra or {})
    return env


def trim(text: str, *, lines: int = 20, chars: int = 2000) -> str:
    """The last ``lines`` lines of a tool's stderr, at most ``chars`` characters."""
    kept = text.strip().splitlines()[-lines:]
    out = "\n".join(kept)
    return out[-chars:]


def _out_of_memory(stderr: str) -> bool:
    """Go's runtime, when a tool hits the memory cap, says so on stderr (then dumps every goroutine)."""
    return any(m in stderr for m in _OOM_MARKERS)


_OOM_MARKERS = (
    "fatal error: runtime: out of memory",
    "fatal error: out of memory",
    "fatal error: runtime: cannot allocate memory",
    # a thread's stack is writable memory RLIMIT_DATA counts: past the cap, Go's next thread fails
    # (runtime/os_linux.go newosproc: "failed to create new OS thread", then "fatal error: newosproc")
    "runtime: failed to create new OS thread",
)


def _oom_line(stderr: str) -> str:
    for line in stderr.splitlines():
        if any(m in line for m in _OOM_MARKERS):
            return line.strip()[:200]
    return ""


def run_tool(
    argv: list[str],
    *,
    env: Mapping[str, str],
    timeout: float,
    max_output: int,
    name: str,
) -> str:
    """Run ``argv`` and return its stdout; RenderError on failure, RenderTimeout past ``timeout``."""
    return ToolRun(argv, env=env, timeout=timeout, max_output=max_output, name=name).wait()


class ToolRun:
    """A render tool started now and collected later, so that Python work overlaps the tool's own."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        timeout: float,
        max_output: int,
        name: str,
        started: tuple[int, int, int] | None = None,
    ) -> None:
        """Start ``argv`` now, or take over ``started`` = (pid, stdout fd, stderr fd) of that command."""
        self.name = name
        self.timeout = timeout
        self.max_output = max_output
        self.deadline = time.monotonic() + timeout
        if RENDER_DEADLINE and RENDER_DEADLINE[0][0] == get_ident():
            self.deadline = min(self.deadline, RENDER_DEADLINE[0][1])
        self.max_memory = effective_cap(os.environ)
        self.code: int | None = None
        if started is None:
            try:
                started = spawn(argv, env)
            except OSError as exc:
                raise RenderError(f"{name} could not start: {exc.strerror} ({argv[0]})") from exc
        self.pid, self._out, self._err = started

    def kill(self) -> None:
        """Stop the tool and everything it started."""
        self._kill()
        self._close()

    def wait(self) -> str:
        """The tool's stdout once it exits 0; RenderError otherwise."""
        out: list[bytes] = []
        err: list[bytes] = []
        head = b""  # the start of stderr: where Go says "out of memory" before its goroutine dump
        size = 0
        sel = selectors.DefaultSelector()
        sel.register(self._out, selectors.EVENT_READ, out)
        sel.register(self._err, selectors.EVENT_READ, err)
        next_look = 0.0
        try:
            while sel.get_map():
                now = time.monotonic()
                if now >= next_look:  # RLIMIT_DATA alone did not hold Go: what is resident counts
                    next_look = now + RSS_INTERVAL
                    self._check_memory(err)
                left = self.deadline - now
                if left <= 0:
                    self._kill()
                    raise RenderTimeout(
                        f"{self.name} did not finish in {self.timeout:g} s and was stopped",
                        stderr=trim(b"".join(err).decode(errors="replace")),
                    )
                for key, _ in sel.select(timeout=min(left, RSS_INTERVAL)):
                    fd = key.fd
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        sel.unregister(fd)
                        continue
                    key.data.append(chunk)
                    if key.data is out:
                        size += len(chunk)
                        if size > self.max_output:
                            self._kill()
                            raise RenderError(
                                f"{self.name} printed more than {self.max_output} bytes; refusing the render"
                            )
                    elif len(err) > MAX_STDERR_CHUNKS:
                        if len(head) < 4096:  # Go writes its fatal error in pieces
                            head += err[0][: 4096 - len(head)]
                        del err[0]  # only the end of stderr is ever shown (trim)
            code = self._reap()
        finally:
            sel.close()
            self._close()
        stderr = b"".join(err).decode(errors="replace")
        if code != 0 and _out_of_memory(head.decode(errors="replace") + stderr):
            raise RenderError(
                f"{self.name} ran out of memory (DRIFTGUARD_CMP_MAX_MEMORY caps each render process); "
                "refusing the render",
                stderr=_oom_line(head.decode(errors="replace") + stderr),
            )
        if code == -signal.SIGXCPU:
            raise RenderTimeout(
                f"{self.name} used more CPU time than a render may (2 x DRIFTGUARD_CMP_TIMEOUT)"
            )
        if code != 0:
            raise RenderError(f"{self.name} failed (exit {code})", stderr=trim(stderr))
        try:
            return b"".join(out).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RenderError(f"{self.name} printed output that is not UTF-8") from exc

    def _check_memory(self, err: list[bytes]) -> None:
        """Stop the tool when the render (this process and the tool's tree) is resident past the cap."""
        used = tree_rss(os.getpid())  # the tools are this process's children
        if used > self.max_memory:
            self._kill()
            raise RenderError(
                f"{self.name} ran out of memory: the render held {used >> 20} MiB, over the "
                f"{self.max_memory >> 20} MiB each render may use (DRIFTGUARD_CMP_MAX_MEMORY, fitted under "
                "the container's limit); refusing the render",
                stderr=trim(b"".join(err).decode(errors="replace"), lines=3),
            )

    def _reap(self) -> int:
        """The exit code (negative: killed by that signal), waiting at most until the deadline."""
        delay = 0.0005
        while self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > self.deadline:  # it closed its output but will not exit
                self._kill()
                raise RenderTimeout(f"{self.name} did not finish in {self.timeout:g} s and was stopped")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return self.code

    def _kill(self) -> None:
        if self.code is None:
            kill_tree(self.pid)  # the tool and its children; the plugin's process group is shared
        if self.code is None:
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(self.pid, 0)
                self.code = os.waitstatus_to_exitcode(status)

    def _close(self) -> None:
        # once only: a file descriptor number closed twice may already belong to someone else
        for fd in (self._out, self._err):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._out = self._err = -1

"""Run a render tool: argv only (never a shell), its own process group, a deadline, an output cap."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from driftguard.errors import RenderError, RenderTimeout

__all__ = ["ToolRun", "run_tool", "tool_env", "trim"]

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
    env.update(
        {
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


def run_tool(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    max_output: int,
    name: str,
) -> str:
    """Run ``argv`` and return its stdout; RenderError on failure, RenderTimeout past ``timeout``."""
    return ToolRun(argv, cwd=cwd, env=env, timeout=timeout, max_output=max_output, name=name).wait()


class ToolRun:
    """A render tool started now and collected later, so that Python work overlaps the tool's own."""

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float,
        max_output: int,
        name: str,
    ) -> None:
        self.name = name
        self.timeout = timeout
        self.max_output = max_output
        self.deadline = time.monotonic() + timeout
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise RenderError(f"{name} could not start: {exc.strerror} ({argv[0]})") from exc

    def kill(self) -> None:
        """Stop the tool and everything it started."""
        _kill(self.proc)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def wait(self) -> str:
        """The tool's stdout once it exits 0; RenderError otherwise."""
        proc = self.proc
        assert proc.stdout is not None and proc.stderr is not None
        out: list[bytes] = []
        err: list[bytes] = []
        size = 0
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        try:
            while sel.get_map():
                left = self.deadline - time.monotonic()
                if left <= 0:
                    _kill(proc)
                    stderr = trim(b"".join(err).decode(errors="replace"))
                    raise RenderTimeout(
                        f"{self.name} did not finish in {self.timeout:g} s and was stopped", stderr=stderr
                    )
                for key, _ in sel.select(timeout=min(left, 1.0)):
                    chunk = os.read(key.fileobj.fileno(), 1 << 16)  # type: ignore[union-attr]
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    key.data.append(chunk)
                    if key.data is out:
                        size += len(chunk)
                        if size > self.max_output:
                            _kill(proc)
                            raise RenderError(
                                f"{self.name} printed more than {self.max_output} bytes; refusing the render"
                            )
            code = proc.wait(timeout=max(self.deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired as exc:
            _kill(proc)
            raise RenderTimeout(f"{self.name} did not finish in {self.timeout:g} s and was stopped") from exc
        finally:
            sel.close()
            proc.stdout.close()
            proc.stderr.close()
        stderr = b"".join(err).decode(errors="replace")
        if code != 0:
            raise RenderError(f"{self.name} failed (exit {code})", stderr=trim(stderr))
        try:
            return b"".join(out).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RenderError(f"{self.name} printed output that is not UTF-8") from exc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

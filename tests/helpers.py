"""What many tests share: polling on a condition, git, the CMP as a subprocess, counting work.

One place for each (docs/development.md, Tests): a test waits with ``wait_until`` (never a fixed
sleep), runs git with ``git``, runs ``driftguard-cmp`` with ``run_cmp``/``start_cmp``, and shows a
bound on work with ``steps`` (never with a clock: timing lives in bench/).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import requests

from standins import processes
from standins.processes import wait_until

__all__ = [
    "CMP",
    "FRONT",
    "LANE",
    "PYTHON_CALLER",
    "examples",
    "git",
    "outbox_depth",
    "outbox_idle",
    "run_cmp",
    "start_cmp",
    "steps",
    "wait_until",
]

T = TypeVar("T")

CMP = [sys.executable, "-m", "cmp_plugin"]
"""``driftguard-cmp`` as this interpreter runs it (the tests' default)."""
FRONT = Path(sys.executable).with_name("driftguard-cmp")
"""The native front (cmp_plugin/preload/front.c) that `make setup` installs as driftguard-cmp."""
PYTHON_CALLER = [str(FRONT.with_name("driftguard-cmp-py"))]
"""pip's console script for the same command: what a pip-only install's driftguard-cmp is (never
``python -m``, which would put the working directory, the tenant's checkout, on sys.path)."""


LANE = os.environ.get("DRIFTGUARD_TEST_LANE", "fast")
"""``fast`` (`make test`, and a bare pytest) or ``all`` (`make test-all`, CI)."""


def examples(full: int) -> int:
    """A property test's example count: ``full`` in test-all, a quarter of it (at least 10) in the
    fast lane, where each input space keeps its property with a modest count."""
    return full if LANE == "all" else max(10, full // 4)


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """``git -C repo ARGS`` with the example identity of standins/processes.py; its stdout, stripped."""
    return processes.git(repo, *args, env=os.environ if env is None else env)


def run_cmp(
    cwd: Path | None,
    env: Mapping[str, str] | None,
    *args: str,
    caller: Sequence[str] = CMP,
    timeout: float = 120,
    **kwargs: Any,
) -> subprocess.CompletedProcess[str]:
    """Run ``driftguard-cmp ARGS`` in ``cwd`` with exactly ``env`` (None: this process's), the
    command as ``caller`` runs it (CMP, PYTHON_CALLER or [FRONT]); the exit status is the test's.

    Output is captured as text unless the test routes stdout or stderr itself; ``kwargs`` go to
    subprocess.run (``start_new_session``, ``process_group``...).
    """
    if "stdout" not in kwargs and "stderr" not in kwargs:
        kwargs["capture_output"] = True
    kwargs.setdefault("text", True)
    return subprocess.run([*caller, *args], cwd=cwd, env=env, check=False, timeout=timeout, **kwargs)


def start_cmp(
    cwd: Path | None, env: Mapping[str, str] | None, *args: str, caller: Sequence[str] = CMP, **kwargs: Any
) -> subprocess.Popen[Any]:
    """Start ``driftguard-cmp ARGS`` without waiting: for a test that signals or watches it running."""
    return subprocess.Popen([*caller, *args], cwd=cwd, env=env, **kwargs)


_PRODUCT = tuple(
    str(ROOT) + os.sep
    for ROOT in (
        Path(__file__).resolve().parents[1] / name
        for name in ("driftguard", "driftguard_serve", "cmp_plugin", "notifier", "analysis_provider")
    )
)


def steps(fn: Callable[[], T]) -> tuple[T, int]:
    """``fn()``'s result and the lines of product code it executed: its loop iterations, counted.

    The tracer only observes (sys.settrace): the code under test runs unchanged. A count is the
    same on an idle and a loaded machine, so a bound on it ("doubling the input at most doubles
    the work") holds where a bound on seconds would not.
    """
    count = 0

    def local(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: FrameType, event: str, arg: object) -> Any:
        return local if frame.f_code.co_filename.startswith(_PRODUCT) else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        result = fn()
    finally:
        sys.settrace(before)
    return result, count


def outbox_depth(url: str, token: str) -> dict[str, int]:
    """The notifier's outbox by queue (notifications, messages, dead), from its /metrics at ``url``."""
    text = requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=5).text
    return {
        q: int(float(v))
        for q, v in re.findall(r'driftguard_notifier_queue_depth\{queue="(\w+)"\} (\S+)', text)
    }


def outbox_idle(url: str, token: str) -> bool:
    """Nothing pending in the notifier's outbox: every notification expanded, every message sent (or
    dead). Nothing more will be sent until something new comes in: what a test waits for before it
    says a message was not sent, or not sent twice."""
    depth = outbox_depth(url, token)
    return bool(depth) and depth.get("notifications") == 0 and depth.get("messages") == 0

"""ToolRun with real child processes: file descriptors, stderr floods."""

from __future__ import annotations

import os
import sys

import pytest

from cmp_plugin.pipeline import deadline
from cmp_plugin.process import ToolRun
from driftguard.errors import RenderError, RenderTimeout

ENV = {"PATH": os.environ["PATH"]}


def tool(code: str, **kwargs: object) -> ToolRun:
    return ToolRun(
        [sys.executable, "-c", code], env=ENV, timeout=30, max_output=1 << 20, name="tool", **kwargs
    )  # type: ignore[arg-type]


def test_a_failed_run_closes_its_pipes_once(tmp_path: object) -> None:
    run = tool("import sys; sys.stderr.write('boom\\n'); sys.exit(4)")
    with pytest.raises(RenderError, match=r"tool failed \(exit 4\)") as info:
        run.wait()
    assert info.value.stderr == "boom"
    r, w = os.pipe()  # very likely the numbers the run just closed
    try:
        run.kill()  # what the pipeline does after a failure: must not close r or w again
        os.write(w, b"still mine")
        assert os.read(r, 100) == b"still mine"
    finally:
        os.close(r)
        os.close(w)


def test_a_stderr_flood_keeps_only_its_end() -> None:
    flood = "import sys\nfor i in range(200_000): sys.stderr.write('noise %d\\n' % i)\nsys.stderr.write('the real error\\n'); sys.exit(1)"
    with pytest.raises(RenderError) as info:
        tool(flood).wait()
    assert info.value.stderr.splitlines()[-1] == "the real error"
    assert len(info.value.stderr) <= 2000


def test_a_tool_in_a_render_is_stopped_by_name_at_the_renders_deadline() -> None:
    """Its own deadline may lie after the render's (a tool started late in the render, on a loaded
    machine or after another tool): it still stops at the render's, before the render's alarm
    (a moment later) would stop it as "the render did not finish", leaving the tool unnamed."""
    with deadline(1.0):
        run = tool("import time; time.sleep(120)")  # its own deadline: 30 s
        with pytest.raises(RenderTimeout) as info:
            run.wait()
    assert str(info.value).startswith("tool did not finish in "), info.value
    assert run.code is not None  # stopped and reaped, not left running


def test_a_tool_that_cannot_start_is_a_render_error(tmp_path: object) -> None:
    with pytest.raises(RenderError, match="could not start"):
        ToolRun(["/nonexistent/helm", "template"], env=ENV, timeout=5, max_output=10, name="helm template")


@pytest.mark.parametrize(
    "go_says",
    [
        "fatal error: runtime: out of memory",
        "fatal error: runtime: cannot allocate memory",
        # a thread's stack past RLIMIT_DATA (runtime/os_linux.go newosproc), then goroutines and registers
        "runtime: failed to create new OS thread (have 9 already; errno=11)\nfatal error: newosproc",
    ],
)
def test_go_running_out_of_memory_is_named(go_says: str) -> None:
    dump = "\\n".join([f"goroutine {i} [running]:" for i in range(2000)])
    code = f"import sys; sys.stderr.write({go_says!r} + '\\n' + '{dump}' + '\\n  gs 0x0\\n'); sys.exit(2)"
    with pytest.raises(RenderError, match="ran out of memory"):
        tool(code).wait()

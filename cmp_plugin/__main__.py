"""The ``driftguard-cmp`` console script (and ``python -m cmp_plugin``): a thin entry nothing imports.

For ``generate`` it first offers the render to the preload server (``cmp_plugin/preload``), then
limits this process and starts the launch plan's tool (``cmp_plugin/launch.py``) before the plugin
itself (``cmp_plugin/cli.py``) is imported.
"""

from __future__ import annotations

import os
import sys

from cmp_plugin.launch import early_start, render_cache_on
from cmp_plugin.spawn import limit_resources


def main() -> None:
    """The ``driftguard-cmp`` console script: the early start for ``generate``, then the plugin.

    With DRIFTGUARD_CMP_PRELOAD on, ``generate`` is first offered to the preload server
    (cmp_plugin/preload), before this process limits itself: a server it starts must not
    inherit the one-render CPU limit.
    """
    if sys.argv[1:] == ["generate"]:
        # this process holds the Application's environment (ARGOCD_ENV_*): no /proc/<pid>/environ
        # for a tool another render runs (cmp_plugin/sandbox.py); the native front does the same
        from cmp_plugin.sandbox import undumpable

        undumpable()
    if sys.argv[1:] == ["generate"] and os.environ.get("DRIFTGUARD_CMP_PRELOAD"):
        from cmp_plugin.preload.client import run_preloaded
        from cmp_plugin.preload.protocol import enabled

        if enabled(os.environ):
            code = run_preloaded(os.environ)
            if code is not None:
                sys.stderr.flush()
                os._exit(code)
    limit_resources(sys.argv[1:], os.environ)
    early = None if render_cache_on(os.environ) else early_start(sys.argv[1:], os.environ)
    from cmp_plugin.cli import run

    run(early=early)


if __name__ == "__main__":
    main()

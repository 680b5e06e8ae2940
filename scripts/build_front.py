#!/usr/bin/env python3
"""Build driftguard-cmp's native front (cmp_plugin/preload/front.c) and install it as ``driftguard-cmp``.

The front hands ``generate`` to the preload server without starting Python, and execs pip's
``driftguard-cmp-py`` (the same ``cmp_plugin.__main__:main``) for everything else. It replaces pip's
``driftguard-cmp`` script in BIN_DIR, atomically; ``driftguard-cmp-py`` must already be there
(``pip install`` puts it there). A pip reinstall puts the Python script back, which works the
same, only slower: `make setup` builds the front again after every install.

Warnings are errors and the usual hardening flags are on (fortify, stack protector, PIE, full
RELRO). The compiler is ``$CC``, else ``cc``; a missing compiler is a clear error naming the
Debian packages to install (gcc, libc6-dev).

Usage: build_front.py BIN_DIR
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "cmp_plugin" / "preload" / "front.c"
FLAGS = [
    "-std=c11",
    "-O2",
    "-Wall",
    "-Wextra",
    "-Wconversion",
    "-Werror",
    "-D_FORTIFY_SOURCE=2",
    "-fstack-protector-strong",
    "-fPIE",
    "-pie",
    "-Wl,-z,relro,-z,now",
]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    bin_dir = Path(argv[0])
    if not (bin_dir / "driftguard-cmp-py").is_file():
        print(
            f"build_front: {bin_dir}/driftguard-cmp-py is missing (pip install the project first)",
            file=sys.stderr,
        )
        return 1
    cc = os.environ.get("CC") or "cc"
    compiler = shutil.which(cc)
    if compiler is None:
        print(
            f"build_front: no C compiler ({cc}) for driftguard-cmp's native front: "
            "apt-get install gcc libc6-dev (or set CC)",
            file=sys.stderr,
        )
        return 1
    python_command = (bin_dir / "driftguard-cmp-py").resolve()
    if any(c in str(python_command) for c in '"\\\n'):
        print(f"build_front: {python_command} cannot be written as a C string", file=sys.stderr)
        return 1
    # the Python command's absolute path built in: no /proc needed, and a copy of the front still
    # finds it (the front falls back to the file beside /proc/self/exe when this one is gone)
    define = f'-DPYTHON_COMMAND_PATH="{python_command}"'
    target = bin_dir / "driftguard-cmp"
    tmp = bin_dir / f".driftguard-cmp.{os.getpid()}.tmp"
    try:
        subprocess.run([compiler, *FLAGS, define, "-o", str(tmp), str(SOURCE)], check=True)
        tmp.chmod(0o755)
        tmp.replace(target)
    except subprocess.CalledProcessError as exc:
        print(f"build_front: {cc} failed (exit {exc.returncode})", file=sys.stderr)
        return 1
    finally:
        tmp.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

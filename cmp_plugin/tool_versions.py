"""Which helm and kustomize the plugin renders with, as the binaries themselves report it.

``driftguard-cmp --version`` prints them (with the plugin's own version), and every render log line
carries them (cmp_plugin/render_log.py), so that "which helm rendered this?" has an answer after
the fact. Asking a Go binary for its version costs ~20 ms, so the answer is kept in the plugin's
cache directory, keyed by each binary's path, size, mtime and inode: a new binary is asked again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from driftguard.errors import ConfigError, RenderError

if TYPE_CHECKING:
    from cmp_plugin.settings import CmpSettings

__all__ = ["CACHE_FILE", "cached", "describe", "probe"]

CACHE_FILE = "tool-versions.json"
UNKNOWN = "unknown"


def _helm(settings: CmpSettings) -> tuple[str, str]:
    """(binary, version) of helm; the version as ``helm version`` prints it (``v4.2.3``)."""
    from cmp_plugin.process import run_tool, tool_env

    helm = settings.helm_path()
    out = run_tool(
        [helm, "version", "--template", "{{ .Version }}"],
        env=tool_env(settings.scratch_root),
        timeout=10,
        max_output=4096,
        name="helm version",
    )
    return helm, out.strip() or UNKNOWN


_KUSTOMIZE_VERSION = re.compile(r"(?:kustomize/)?(v\d+\.\d+\.\d+[0-9A-Za-z.+-]*)")


def _kustomize(settings: CmpSettings) -> tuple[str, str]:
    """(binary, version) of kustomize: kubectl's built-in one, or a standalone kustomize's own."""
    from cmp_plugin.process import run_tool, tool_env

    argv = settings.kustomize_argv()
    binary = argv[0]
    if argv[1] == "kustomize":  # kubectl: "Kustomize Version: v5.8.1" among its client versions
        out = run_tool(
            [binary, "version", "--client", "-o", "json"],
            env=tool_env(settings.scratch_root),
            timeout=10,
            max_output=1 << 16,
            name="kubectl version",
        )
        try:
            version = str(json.loads(out).get("kustomizeVersion") or "")
        except (ValueError, AttributeError):
            version = ""
    else:  # kustomize 5 prints "v5.8.1"; older ones "{Version:kustomize/v4.5.7 ...}"
        out = run_tool(
            [binary, "version"],
            env=tool_env(settings.scratch_root),
            timeout=10,
            max_output=4096,
            name="kustomize version",
        )
        m = _KUSTOMIZE_VERSION.search(out)
        version = m.group(1) if m else ""
    return binary, version or UNKNOWN


def probe(settings: CmpSettings) -> dict[str, str]:
    """Ask both binaries now: ``{"helm": "v4.2.3", "kustomize": "v5.8.1"}``.

    A tool that cannot be found or run is reported as ``missing: <why>`` rather than raised: the
    caller (``--version``, a log line) shows what it can.
    """
    out: dict[str, str] = {}
    for name, ask in (("helm", _helm), ("kustomize", _kustomize)):
        try:
            out[name] = ask(settings)[1]
        except (ConfigError, RenderError) as exc:
            out[name] = f"missing: {str(exc).splitlines()[0][:160]}"
    return out


def _stamp(path: str) -> list[int] | None:
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _binaries(settings: CmpSettings) -> dict[str, str]:
    found = {}
    with contextlib.suppress(ConfigError):
        found["helm"] = settings.helm_path()
    with contextlib.suppress(ConfigError):
        found["kustomize"] = settings.kustomize_argv()[0]
    return found


def cached(settings: CmpSettings) -> dict[str, str]:
    """The versions, from the cache file while both binaries are unchanged, else probed and stored."""
    path = settings.cache_dir / CACHE_FILE
    stamps = {name: [binary, _stamp(binary)] for name, binary in _binaries(settings).items()}
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(kept, dict) and kept.get("stamps") == stamps and isinstance(kept.get("versions"), dict):
            return {str(k): str(v) for k, v in kept["versions"].items()}
    except (OSError, ValueError):
        pass
    versions = probe(settings)
    if all(not v.startswith("missing") for v in versions.values()):
        try:
            settings.cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = path.with_name(f"{CACHE_FILE}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"stamps": stamps, "versions": versions}), encoding="utf-8")
            tmp.replace(path)
        except OSError:
            pass  # a cache that cannot be written only costs the next render a probe
    return versions


def describe(version: str, versions: dict[str, str]) -> str:
    """The text of ``driftguard-cmp --version``."""
    lines = [f"driftguard-cmp {version}"]
    lines += [f"{name} {versions[name]}" for name in ("helm", "kustomize")]
    return "\n".join(lines) + "\n"

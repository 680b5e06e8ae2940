"""The CMP's own settings: one frozen object, read once from ``DRIFTGUARD_*`` variables."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from driftguard.errors import ConfigError

__all__ = ["CmpSettings"]

DEFAULT_STRAY = ("helm-rendered", "kustomize-build", "*.local.yaml", "*.local.yml")


@dataclass(frozen=True)
class CmpSettings:
    """Settings for the render pipeline; every field has a default that fits a repo-server sidecar."""

    helm: str = ""
    """Path of helm (DRIFTGUARD_HELM); default: helm on PATH."""
    kustomize: str = ""
    """Path of kustomize, or of kubectl for `kubectl kustomize` (DRIFTGUARD_KUSTOMIZE); default: PATH."""
    timeout: float = 45.0
    """Seconds a renderer may run before its process group is killed (DRIFTGUARD_CMP_TIMEOUT); under Argo CD's 60 s."""
    max_output_bytes: int = 64 * 1024 * 1024
    """Largest render accepted (DRIFTGUARD_CMP_MAX_OUTPUT_BYTES)."""
    stray_patterns: tuple[str, ...] = DEFAULT_STRAY
    """Paths that mark committed render output (DRIFTGUARD_CMP_STRAY_PATTERNS, comma-separated, replaces the default)."""
    scratch_root: Path = field(default_factory=lambda: Path(os.environ.get("TMPDIR") or "/tmp"))  # noqa: S108
    """Where each render gets its private scratch directory (helm homes, inline values): the sidecar's /tmp."""
    cache_dir: Path = field(default_factory=lambda: Path(os.environ.get("TMPDIR") or "/tmp") / "driftguard")  # noqa: S108
    """Where the last good render of each app is kept as a shrink baseline (DRIFTGUARD_CMP_CACHE_DIR)."""

    baseline_required: bool = False
    """Refuse when no shrink baseline can be read (DRIFTGUARD_CMP_BASELINE_REQUIRED); default: warn and pass."""
    baseline_timeout: float = 5.0
    """Seconds to wait for the Application from the cluster or Argo CD (DRIFTGUARD_CMP_BASELINE_TIMEOUT)."""
    kubeconfig: str = ""
    """A kubeconfig for reading Applications (DRIFTGUARD_KUBECONFIG); default: in-cluster config when present."""
    argocd_namespace: str = "argocd"
    """Argo CD's control-plane namespace, where Applications live by default (DRIFTGUARD_ARGOCD_NAMESPACE)."""
    argocd_url: str = ""
    """Argo CD API base URL, the second baseline source (DRIFTGUARD_ARGOCD_URL)."""
    argocd_token: str = field(default="", repr=False)
    """Argo CD API token with `get` on applications (DRIFTGUARD_ARGOCD_TOKEN)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CmpSettings:
        env = os.environ if environ is None else environ
        kwargs: dict[str, object] = {}
        if env.get("DRIFTGUARD_HELM"):
            kwargs["helm"] = env["DRIFTGUARD_HELM"]
        if env.get("DRIFTGUARD_KUSTOMIZE"):
            kwargs["kustomize"] = env["DRIFTGUARD_KUSTOMIZE"]
        if env.get("DRIFTGUARD_CMP_TIMEOUT"):
            kwargs["timeout"] = _positive(env, "DRIFTGUARD_CMP_TIMEOUT", float)
        if env.get("DRIFTGUARD_CMP_MAX_OUTPUT_BYTES"):
            kwargs["max_output_bytes"] = int(_positive(env, "DRIFTGUARD_CMP_MAX_OUTPUT_BYTES", int))
        if env.get("DRIFTGUARD_CMP_STRAY_PATTERNS"):
            kwargs["stray_patterns"] = tuple(
                p.strip() for p in env["DRIFTGUARD_CMP_STRAY_PATTERNS"].split(",") if p.strip()
            )
        if env.get("DRIFTGUARD_CMP_CACHE_DIR"):
            kwargs["cache_dir"] = Path(env["DRIFTGUARD_CMP_CACHE_DIR"])
        if env.get("DRIFTGUARD_CMP_BASELINE_REQUIRED"):
            kwargs["baseline_required"] = _bool(env, "DRIFTGUARD_CMP_BASELINE_REQUIRED")
        if env.get("DRIFTGUARD_CMP_BASELINE_TIMEOUT"):
            kwargs["baseline_timeout"] = _positive(env, "DRIFTGUARD_CMP_BASELINE_TIMEOUT", float)
        for name, attr in (
            ("DRIFTGUARD_KUBECONFIG", "kubeconfig"),
            ("DRIFTGUARD_ARGOCD_NAMESPACE", "argocd_namespace"),
            ("DRIFTGUARD_ARGOCD_URL", "argocd_url"),
            ("DRIFTGUARD_ARGOCD_TOKEN", "argocd_token"),
        ):
            if env.get(name):
                kwargs[attr] = env[name]
        url = str(kwargs.get("argocd_url", ""))
        if url and not url.startswith(("https://", "http://")):
            raise ConfigError("DRIFTGUARD_ARGOCD_URL", f"must start with https:// (got {url!r})")
        if url and not kwargs.get("argocd_token"):
            raise ConfigError("DRIFTGUARD_ARGOCD_TOKEN", "is required when DRIFTGUARD_ARGOCD_URL is set")
        return cls(**kwargs)  # type: ignore[arg-type]

    def helm_path(self) -> str:
        """The helm binary, or a ConfigError naming the setting."""
        found = self.helm or shutil.which("helm")
        if not found or not Path(found).is_file():
            raise ConfigError(
                "DRIFTGUARD_HELM", f"helm not found ({self.helm or 'not on PATH'}); set it to the helm binary"
            )
        return found

    def kustomize_argv(self) -> list[str]:
        """``[kustomize, build]`` or ``[kubectl, kustomize]``, or a ConfigError naming the setting."""
        found = self.kustomize or shutil.which("kustomize") or shutil.which("kubectl")
        if not found or not Path(found).is_file():
            raise ConfigError(
                "DRIFTGUARD_KUSTOMIZE", "neither kustomize nor kubectl found; set it to one of them"
            )
        return [found, "kustomize"] if Path(found).name.startswith("kubectl") else [found, "build"]


def _bool(env: Mapping[str, str], name: str) -> bool:
    value = env[name].strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(name, f"must be true or false, got {env[name]!r}")


def _positive(env: Mapping[str, str], name: str, kind: type) -> float:
    try:
        value = float(kind(env[name]))
    except ValueError as exc:
        raise ConfigError(name, f"not a number: {env[name]!r}") from exc
    if value <= 0:
        raise ConfigError(name, "must be greater than 0")
    return value

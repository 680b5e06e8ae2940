"""The CMP's own settings: one frozen object, read once from ``DRIFTGUARD_*`` variables.

A NamedTuple rather than a dataclass, like everything ``generate`` needs before the renderer
starts (see ``cmp_plugin/params.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from cmp_plugin import paths
from driftguard.env import boolean, from_env, positive, secret
from driftguard.errors import ConfigError

__all__ = ["CmpSettings"]

DEFAULT_STRAY = ("helm-rendered", "kustomize-build", "*.local.yaml", "*.local.yml")


class CmpSettings(NamedTuple):
    """Settings for the render pipeline; every field has a default that fits a repo-server sidecar."""

    helm: str = ""
    """Path of helm (DRIFTGUARD_HELM); default: helm on PATH."""
    kustomize: str = ""
    """Path of kustomize, or of kubectl for `kubectl kustomize` (DRIFTGUARD_KUSTOMIZE); default: PATH."""
    timeout: float = 45.0
    """Seconds a whole render may take, tools and in-process work (DRIFTGUARD_CMP_TIMEOUT); under Argo CD's 60 s."""
    max_output_bytes: int = 64 * 1024 * 1024
    """Largest render accepted (DRIFTGUARD_CMP_MAX_OUTPUT_BYTES)."""
    stray_patterns: tuple[str, ...] = DEFAULT_STRAY
    """Paths that mark committed render output (DRIFTGUARD_CMP_STRAY_PATTERNS, comma-separated, replaces the default)."""
    scratch_root: Path = Path("/tmp")  # noqa: S108
    """Where each render gets its private scratch directory (helm homes, inline values): the sidecar's /tmp ($TMPDIR)."""
    cache_dir: Path = Path("/tmp/driftguard")  # noqa: S108
    """Where the last good render of each app is kept as a shrink baseline (DRIFTGUARD_CMP_CACHE_DIR; default $TMPDIR/driftguard)."""

    baseline_required: bool = False
    """Refuse when no shrink baseline can be read (DRIFTGUARD_CMP_BASELINE_REQUIRED); default: warn and pass."""
    baseline_timeout: float = 5.0
    """Seconds to wait for the Application from the cluster or Argo CD (DRIFTGUARD_CMP_BASELINE_TIMEOUT)."""
    kubeconfig: str = ""
    """A kubeconfig for reading Applications (DRIFTGUARD_KUBECONFIG); default: the pod's service account."""
    service_account_dir: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount")
    """Where the sidecar's projected token and ca.crt are mounted (DRIFTGUARD_CMP_SERVICE_ACCOUNT_DIR)."""
    kube_api: str = ""
    """The kube-apiserver, https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (set by Kubernetes in pods)."""
    argocd_namespace: str = "argocd"
    """Argo CD's control-plane namespace, where Applications live by default (DRIFTGUARD_ARGOCD_NAMESPACE)."""
    argocd_url: str = ""
    """Argo CD API base URL, the second baseline source (DRIFTGUARD_ARGOCD_URL)."""
    argocd_token: str = ""
    """Argo CD API token with `get` on applications (DRIFTGUARD_ARGOCD_TOKEN); never shown by repr()."""
    argocd_ca_file: str = ""
    """CA bundle for the Argo CD API's certificate (DRIFTGUARD_ARGOCD_CA_FILE), as for the services."""
    argocd_insecure: bool = False
    """Skip TLS verification of the Argo CD API (DRIFTGUARD_ARGOCD_INSECURE): for a lab, never for production."""
    policy_file: str = ""
    """The platform's guard policy, YAML (DRIFTGUARD_CMP_POLICY); see cmp_plugin/policy.py and docs/security.md."""
    kustomize_load_restrictor: str = "LoadRestrictionsRootOnly"
    """kustomize --load-restrictor for every build (DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR): the platform's, never a tenant's."""
    kustomize_enable_helm: bool = False
    """kustomize --enable-helm for every build (DRIFTGUARD_KUSTOMIZE_ENABLE_HELM): the platform's, never a tenant's."""
    max_memory: int = 768 * 1024 * 1024
    """Address space each render may use, the plugin and its tools each (DRIFTGUARD_CMP_MAX_MEMORY): under the sidecar's 1Gi limit."""
    memory_limit: int = 0
    """The container's memory limit, when the cgroup cannot be read (DRIFTGUARD_CMP_MEMORY_LIMIT: the Downward API's
    ``limits.memory``); 0: read from the cgroup (cmp_plugin/memory.py)."""
    tool_read_paths: str = ""
    """Extra directories render tools may read under Landlock (DRIFTGUARD_CMP_TOOL_READ_PATHS, colon-separated)."""
    tool_write_paths: str = ""
    """Extra directories render tools may write under Landlock (DRIFTGUARD_CMP_TOOL_WRITE_PATHS, colon-separated)."""
    preload: bool = False
    """Fork each ``generate`` from a preloaded server (DRIFTGUARD_CMP_PRELOAD; cmp_plugin/preload): on in the sidecar manifests."""
    helm_repositories: str = ""
    """helm's repositories.yaml mounted by the platform (DRIFTGUARD_CMP_HELM_REPOSITORIES): credentials per chart repository URL, names for @name dependencies."""
    helm_registry_config: str = ""
    """A docker config.json mounted by the platform (DRIFTGUARD_CMP_HELM_REGISTRY_CONFIG): OCI registry credentials for helm."""
    helm_vendored_only: bool = False
    """Refuse a chart whose dependencies would be fetched over the network (DRIFTGUARD_CMP_HELM_VENDORED_ONLY): vendored charts/ only."""
    helm_plain_http_registries: tuple[str, ...] = ()
    """OCI registries (host:port, comma-separated) that speak plain HTTP (DRIFTGUARD_CMP_HELM_PLAIN_HTTP_REGISTRIES)."""
    render_cache_bytes: int = 256 * 1024 * 1024
    """Bytes of renders kept in the cache dir, served by fingerprint (DRIFTGUARD_CMP_RENDER_CACHE_BYTES; 0: off; cmp_plugin/render_cache.py)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CmpSettings:
        env = os.environ if environ is None else environ
        kwargs = from_env(env, ENV)
        kwargs.setdefault("scratch_root", Path(paths.scratch_root(env)))
        kwargs.setdefault("cache_dir", Path(paths.cache_dir(env)))
        # relative paths resolve against the working directory, the tenant's checkout: a launch
        # plan or baseline committed there would be trusted as the plugin's own
        for name, key in (
            ("DRIFTGUARD_CMP_HELM_REPOSITORIES", "helm_repositories"),
            ("DRIFTGUARD_CMP_HELM_REGISTRY_CONFIG", "helm_registry_config"),
        ):
            if kwargs.get(key) and not Path(kwargs[key]).is_absolute():
                raise ConfigError(name, f"must be an absolute path (got {kwargs[key]!r})")
        for name, key in (("TMPDIR", "scratch_root"), ("DRIFTGUARD_CMP_CACHE_DIR", "cache_dir")):
            if not Path(kwargs[key]).is_absolute():
                if key == "cache_dir" and not env.get("DRIFTGUARD_CMP_CACHE_DIR"):
                    name = "TMPDIR"  # the cache's default lives under it
                raise ConfigError(name, f"must be an absolute path (got {str(kwargs[key])!r})")
        host = env.get("KUBERNETES_SERVICE_HOST", "")
        if host:
            port = env.get("KUBERNETES_SERVICE_PORT") or "443"
            kwargs["kube_api"] = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        token = secret(env, "DRIFTGUARD_ARGOCD_TOKEN")  # or _TOKEN_FILE, as driftguard/argocd.py reads it
        if token:
            kwargs["argocd_token"] = token
        url = str(kwargs.get("argocd_url", ""))
        if url and not url.startswith(("https://", "http://")):
            raise ConfigError("DRIFTGUARD_ARGOCD_URL", f"must start with https:// (got {url!r})")
        if url and not kwargs.get("argocd_token"):
            raise ConfigError("DRIFTGUARD_ARGOCD_TOKEN", "is required when DRIFTGUARD_ARGOCD_URL is set")
        return cls(**kwargs)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{k}={'***' if k == 'argocd_token' and v else v!r}" for k, v in self._asdict().items()
        )
        return f"CmpSettings({shown})"

    def helm_path(self) -> str:
        """The helm binary, or a ConfigError naming the setting."""
        if self.helm:
            found: str | None = self.helm
        else:
            import shutil  # only when searching PATH: it is a few ms to import

            found = shutil.which("helm")
        if not found or not Path(found).is_file():
            raise ConfigError(
                "DRIFTGUARD_HELM", f"helm not found ({self.helm or 'not on PATH'}); set it to the helm binary"
            )
        return found

    def kustomize_argv(self) -> list[str]:
        """``[kustomize, build]`` or ``[kubectl, kustomize]``, or a ConfigError naming the setting."""
        import shutil

        found = self.kustomize or shutil.which("kustomize") or shutil.which("kubectl")
        if not found or not Path(found).is_file():
            raise ConfigError(
                "DRIFTGUARD_KUSTOMIZE", "neither kustomize nor kubectl found; set it to one of them"
            )
        return [found, "kustomize"] if Path(found).name.startswith("kubectl") else [found, "build"]


def _restrictor(raw: str) -> str:
    value = raw.strip()
    if value not in ("LoadRestrictionsRootOnly", "LoadRestrictionsNone"):
        raise ValueError("expected LoadRestrictionsRootOnly or LoadRestrictionsNone")
    return value


def _absolute_paths(raw: str) -> str:
    """Colon-separated absolute paths (a relative one would resolve in the tenant's checkout)."""
    if any(p and not p.startswith("/") for p in raw.split(":")):
        raise ValueError("every path must be absolute")
    return raw


def _non_negative(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


def _patterns(raw: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in raw.split(",") if p.strip())


ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    "DRIFTGUARD_HELM": ("helm", str),
    "DRIFTGUARD_KUSTOMIZE": ("kustomize", str),
    "DRIFTGUARD_CMP_TIMEOUT": ("timeout", positive(float)),
    "DRIFTGUARD_CMP_MAX_OUTPUT_BYTES": ("max_output_bytes", positive(int)),
    "DRIFTGUARD_CMP_STRAY_PATTERNS": ("stray_patterns", _patterns),
    "DRIFTGUARD_CMP_CACHE_DIR": ("cache_dir", Path),
    "DRIFTGUARD_CMP_BASELINE_REQUIRED": ("baseline_required", boolean),
    "DRIFTGUARD_CMP_BASELINE_TIMEOUT": ("baseline_timeout", positive(float)),
    "DRIFTGUARD_KUBECONFIG": ("kubeconfig", str),
    "DRIFTGUARD_CMP_SERVICE_ACCOUNT_DIR": ("service_account_dir", Path),
    "DRIFTGUARD_ARGOCD_NAMESPACE": ("argocd_namespace", str),
    "DRIFTGUARD_ARGOCD_URL": ("argocd_url", str),
    "DRIFTGUARD_ARGOCD_TOKEN": ("argocd_token", str),
    "DRIFTGUARD_ARGOCD_CA_FILE": ("argocd_ca_file", str),
    "DRIFTGUARD_ARGOCD_INSECURE": ("argocd_insecure", boolean),
    "DRIFTGUARD_CMP_POLICY": ("policy_file", str),
    "DRIFTGUARD_KUSTOMIZE_LOAD_RESTRICTOR": ("kustomize_load_restrictor", _restrictor),
    "DRIFTGUARD_KUSTOMIZE_ENABLE_HELM": ("kustomize_enable_helm", boolean),
    "DRIFTGUARD_CMP_MAX_MEMORY": ("max_memory", positive(int)),
    "DRIFTGUARD_CMP_PRELOAD": ("preload", boolean),
    "DRIFTGUARD_CMP_HELM_REPOSITORIES": ("helm_repositories", str),
    "DRIFTGUARD_CMP_HELM_REGISTRY_CONFIG": ("helm_registry_config", str),
    "DRIFTGUARD_CMP_HELM_VENDORED_ONLY": ("helm_vendored_only", boolean),
    "DRIFTGUARD_CMP_HELM_PLAIN_HTTP_REGISTRIES": ("helm_plain_http_registries", _patterns),
    "DRIFTGUARD_CMP_MEMORY_LIMIT": ("memory_limit", positive(int)),
    "DRIFTGUARD_CMP_TOOL_READ_PATHS": ("tool_read_paths", _absolute_paths),
    "DRIFTGUARD_CMP_TOOL_WRITE_PATHS": ("tool_write_paths", _absolute_paths),
    "DRIFTGUARD_CMP_RENDER_CACHE_BYTES": ("render_cache_bytes", _non_negative),
}

"""What an Application manages now: the shrink guard's baseline.

Sources, in order: the Application's ``status.resources`` read with the kubernetes client
(in-cluster config from the sidecar's projected token, or DRIFTGUARD_KUBECONFIG; RBAC: ``get`` on
applications only), else the Argo CD API (DRIFTGUARD_ARGOCD_URL and _TOKEN), else the last render
of this app that passed every guard, cached under the sidecar's /tmp. The approval annotation
``driftguard.io/approve-prune`` comes from the same Application object.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from cmp_plugin.argo_env import AppEnv
from cmp_plugin.settings import CmpSettings
from driftguard.manifests import ResourceKey

__all__ = ["APPROVE_ANNOTATION", "Baseline", "fetch", "remember"]

APPROVE_ANNOTATION = "driftguard.io/approve-prune"
_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class Baseline(NamedTuple):
    """The resources an Application manages now, where that came from, and its prune approval."""

    keys: frozenset[ResourceKey]
    source: str
    approval: str | None = None


def app_identity(env: AppEnv, settings: CmpSettings) -> tuple[str, str]:
    """(namespace, name) of the Application: ``ARGOCD_APP_NAME`` is ``<ns>_<name>`` outside the control plane."""
    if "_" in env.app_name:
        namespace, name = env.app_name.split("_", 1)
        return namespace, name
    return settings.argocd_namespace, env.app_name


def fetch(env: AppEnv, settings: CmpSettings) -> tuple[Baseline | None, list[str]]:
    """The first baseline source that answers, and why the others did not."""
    notes: list[str] = []
    if not env.app_name:
        return None, ["no ARGOCD_APP_NAME: no baseline to compare against"]
    namespace, name = app_identity(env, settings)
    if settings.kubeconfig or _in_cluster():
        try:
            return _from_application(
                _kube_get(namespace, name, settings), "the cluster (Application status)"
            ), notes
        except Exception as exc:
            notes.append(f"could not read Application {namespace}/{name} from the cluster: {_short(exc)}")
    if settings.argocd_url:
        try:
            return _from_application(_argocd_get(namespace, name, settings), "the Argo CD API"), notes
        except Exception as exc:
            notes.append(f"could not read Application {namespace}/{name} from the Argo CD API: {_short(exc)}")
    cached = _cache_file(settings, env)
    if cached.is_file():
        try:
            raw = json.loads(cached.read_text())
            keys = frozenset(ResourceKey(*k) for k in raw["keys"])
            return Baseline(
                keys, f"the last render that passed (revision {raw.get('revision', '?')[:12]})"
            ), notes
        except (OSError, ValueError, KeyError, TypeError) as exc:
            notes.append(f"the cached baseline {cached.name} is unreadable: {exc}")
    notes.append("no baseline source answered (cluster, Argo CD API, cached render)")
    return None, notes


def remember(env: AppEnv, settings: CmpSettings, keys: list[ResourceKey]) -> None:
    """Cache a render that passed every guard as this app's baseline of last resort."""
    if not env.app_name:
        return
    path = _cache_file(settings, env)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        # unsorted and compact: this runs on every render, and order does not matter to fetch()
        tmp.write_text(json.dumps({"revision": env.revision, "keys": list(set(keys))}, separators=(",", ":")))
        tmp.replace(path)
    except OSError:
        pass  # a cache that cannot be written only weakens the last-resort baseline


def _cache_file(settings: CmpSettings, env: AppEnv) -> Path:
    return settings.cache_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", env.app_name) + ".json")


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (_SA_DIR / "token").is_file()


def _kube_get(namespace: str, name: str, settings: CmpSettings) -> dict[str, Any]:
    from kubernetes import client, config  # ~200 ms to import: only here, off the render's critical path

    if settings.kubeconfig:
        api_client = config.new_client_from_config(config_file=settings.kubeconfig)  # type: ignore[no-untyped-call]
    else:
        cfg = client.Configuration()
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        api_client = client.ApiClient(cfg)
    with api_client:
        api = client.CustomObjectsApi(api_client)
        obj = api.get_namespaced_custom_object(
            "argoproj.io",
            "v1alpha1",
            namespace,
            "applications",
            name,
            _request_timeout=settings.baseline_timeout,
        )
    if not isinstance(obj, dict):
        raise ValueError("the API answered something that is not an object")
    return obj


def _argocd_get(namespace: str, name: str, settings: CmpSettings) -> dict[str, Any]:
    import requests

    resp = requests.get(
        f"{settings.argocd_url.rstrip('/')}/api/v1/applications/{name}",
        params={"appNamespace": namespace},
        headers={"Authorization": f"Bearer {settings.argocd_token}"},
        timeout=settings.baseline_timeout,
    )
    if resp.status_code != 200:
        raise ValueError(f"HTTP {resp.status_code}")
    obj = resp.json()
    if not isinstance(obj, dict):
        raise ValueError("the API answered something that is not an object")
    return obj


def _from_application(app: dict[str, Any], source: str) -> Baseline:
    status = app.get("status") or {}
    items = status.get("resources") or []
    keys = set()
    for item in items:
        if not isinstance(item, dict) or item.get("requiresPruning") or item.get("hook"):
            continue  # already outside Git: not part of what the app is meant to manage
        keys.add(
            ResourceKey(
                str(item.get("group") or ""),
                str(item.get("kind") or ""),
                str(item.get("namespace") or ""),
                str(item.get("name") or ""),
            )
        )
    annotations = (app.get("metadata") or {}).get("annotations") or {}
    approval = annotations.get(APPROVE_ANNOTATION)
    return Baseline(frozenset(keys), source, str(approval) if approval else None)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]

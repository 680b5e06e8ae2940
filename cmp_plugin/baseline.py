"""What an Application manages now: the shrink guard's baseline.

Sources, in order: the Application's ``status.resources`` from the kube-apiserver (cmp_plugin.kube:
the sidecar's projected token, or DRIFTGUARD_KUBECONFIG; RBAC: ``get`` on applications only), else
the Argo CD API (DRIFTGUARD_ARGOCD_URL, _TOKEN, _CA_FILE; driftguard.argocd), else the last render
of this app that passed every guard, cached under the sidecar's /tmp. The approval annotation
``driftguard.io/approve-prune`` comes from the same Application object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from cmp_plugin import kube
from cmp_plugin.argo_env import AppEnv
from cmp_plugin.paths import open_private, safe_name, write_private
from cmp_plugin.settings import CmpSettings
from driftguard.manifests import ResourceKey

__all__ = ["APPROVE_ANNOTATION", "Baseline", "fetch", "remember"]

APPROVE_ANNOTATION = "driftguard.io/approve-prune"


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
    if settings.kubeconfig or kube.in_cluster(settings):
        try:
            app = kube.application(namespace, name, settings)
            return _from_application(app, "the cluster (Application status)"), notes
        except Exception as exc:
            notes.append(f"could not read Application {namespace}/{name} from the cluster: {_short(exc)}")
    if settings.argocd_url:
        try:
            return _from_application(_argocd_get(namespace, name, settings), "the Argo CD API"), notes
        except Exception as exc:
            notes.append(f"could not read Application {namespace}/{name} from the Argo CD API: {_short(exc)}")
    cached = _cache_file(settings, env)
    data = open_private(str(cached), 1 << 26)  # never a file someone else planted in a shared $TMPDIR
    if data is not None:
        try:
            raw = json.loads(data)
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
        # unsorted and compact: this runs on every render, and order does not matter to fetch()
        text = json.dumps({"revision": env.revision, "keys": list(set(keys))}, separators=(",", ":"))
        write_private(str(path), text.encode())
    except OSError:
        pass  # a cache that cannot be written only weakens the last-resort baseline


def _cache_file(settings: CmpSettings, env: AppEnv) -> Path:
    return settings.cache_dir / (safe_name(env.app_name) + ".json")


def _argocd_get(namespace: str, name: str, settings: CmpSettings) -> dict[str, Any]:
    from driftguard.argocd import ArgoCDClient, ArgoCDSettings

    client = ArgoCDClient(
        ArgoCDSettings(
            url=settings.argocd_url,
            token=settings.argocd_token,
            ca_file=settings.argocd_ca_file,
            insecure=settings.argocd_insecure,
            timeout=settings.baseline_timeout,
            retries=0,  # a render waits for this: one try, then the next source
            namespace=settings.argocd_namespace,
        )
    )
    return client.application(name, namespace)


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

"""Read one Application from the kube-apiserver: the shrink guard's first baseline source.

In the sidecar (the default install) this is one HTTPS GET with the projected service-account
token and the cluster CA, made with the standard library: importing the kubernetes client costs
~240 ms on every render, the standard library's HTTPS ~30 ms, and either runs while helm renders.
With DRIFTGUARD_KUBECONFIG (off-cluster: ``driftguard-cmp render``, tests) the kubernetes client
reads the kubeconfig, so every way it authenticates works. RBAC: ``get`` on applications only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cmp_plugin.settings import CmpSettings

__all__ = ["application", "in_cluster"]

MAX_BODY = 32 * 1024 * 1024
"""An Application managing thousands of resources is a few MB; more than this is not an answer."""


def in_cluster(settings: CmpSettings) -> bool:
    """Running in a pod that has a service-account token mounted."""
    return bool(settings.kube_api) and (settings.service_account_dir / "token").is_file()


def application(namespace: str, name: str, settings: CmpSettings) -> dict[str, Any]:
    """The Application object; any failure raises (the caller notes it and tries the next source)."""
    obj = (
        _with_client(namespace, name, settings) if settings.kubeconfig else _in_pod(namespace, name, settings)
    )
    if not isinstance(obj, dict):
        raise ValueError("the API answered something that is not an object")
    return obj


def _in_pod(namespace: str, name: str, settings: CmpSettings) -> Any:
    import http.client
    import json
    import ssl
    from urllib.parse import quote, urlsplit

    sa = settings.service_account_dir
    token = (sa / "token").read_text().strip()  # projected tokens rotate: read on every request
    context = ssl.create_default_context(cafile=str(sa / "ca.crt"))
    api = urlsplit(settings.kube_api)
    conn = http.client.HTTPSConnection(
        api.hostname or "", api.port or 443, timeout=settings.baseline_timeout, context=context
    )
    try:
        conn.request(
            "GET",
            f"/apis/argoproj.io/v1alpha1/namespaces/{quote(namespace, safe='')}/applications/{quote(name, safe='')}",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )
        resp = conn.getresponse()
        body = resp.read(MAX_BODY + 1)
    finally:
        conn.close()
    if resp.status != 200:
        raise ValueError(f"HTTP {resp.status} {resp.reason}")
    if len(body) > MAX_BODY:
        raise ValueError(f"the answer is larger than {MAX_BODY} bytes")
    return json.loads(body)


def _with_client(namespace: str, name: str, settings: CmpSettings) -> Any:
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=settings.kubeconfig)  # type: ignore[no-untyped-call]
    with api_client:
        return client.CustomObjectsApi(api_client).get_namespaced_custom_object(
            "argoproj.io",
            "v1alpha1",
            namespace,
            "applications",
            name,
            _request_timeout=settings.baseline_timeout,
        )

"""Chart repositories for ``helm dependency build``, set up per render as Argo CD sets them up.

Argo CD (v3.5.1) reads the repositories of a chart's dependencies from ``Chart.yaml``
(reposerver/repository/repository.go ``getHelmDependencyRepos``: ``https://`` and ``oci://`` URLs,
``@name`` and ``alias:name`` references to repositories it knows), adds each (util/helm/helm.go
``DependencyBuild``: ``helm repo add`` for a chart repository, ``helm registry login`` for an OCI
registry with credentials) in a helm home of its own (util/helm/cmd.go: ``HELM_CONFIG_HOME`` and
the XDG homes under a temporary directory), then runs ``helm dependency build``.

The sidecar gets no repository credentials from Argo CD (they stay in the repo-server), so here:

- the helm homes are the render's scratch directory (process.tool_env), removed after the render;
- every chart repository a dependency names (``http://`` too: helm fetches it all the same) is
  written to that home's ``repositories.yaml`` before the build, which then fetches its index, as
  ``helm repo add`` would; no credential ever goes on a command line;
- credentials come only from files the platform mounts: ``DRIFTGUARD_CMP_HELM_REPOSITORIES`` (helm's
  own ``repositories.yaml`` format, matched by URL; its names answer ``@name``/``alias:name``) and
  ``DRIFTGUARD_CMP_HELM_REGISTRY_CONFIG`` (a docker ``config.json`` for OCI registries, handed to
  helm as ``HELM_REGISTRY_CONFIG``);
- ``DRIFTGUARD_CMP_HELM_VENDORED_ONLY`` forbids fetching anything: a dependency that is not in
  ``charts/`` and not ``file://`` is an error naming it;
- ``DRIFTGUARD_CMP_HELM_PLAIN_HTTP_REGISTRIES`` lists the OCI registries that speak plain HTTP
  (Argo CD's ``insecureOCIForceHttp``: ``--plain-http`` for the whole build, as Argo CD passes it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from driftguard.errors import ConfigError, InputError

if TYPE_CHECKING:
    from cmp_plugin.settings import CmpSettings

__all__ = ["Dependency", "chart_dependencies", "prepare", "update_indexes"]

NETWORK_PREFIXES = ("http://", "https://", "oci://", "@", "alias:")
_CREDENTIAL_KEYS = (
    "username",
    "password",
    "caFile",
    "certFile",
    "keyFile",
    "insecure_skip_tls_verify",
    "pass_credentials_all",
)


class Dependency(NamedTuple):
    name: str
    repository: str

    @property
    def fetched(self) -> bool:
        """Whether helm fetches it over the network (not vendored, not ``file://``)."""
        return self.repository.startswith(NETWORK_PREFIXES)

    def shown(self) -> str:
        return f"{self.name} ({self.repository})" if self.repository else self.name


def chart_dependencies(chart: Any) -> list[Dependency]:
    """The dependencies a parsed ``Chart.yaml`` declares (name and repository as written)."""
    deps = chart.get("dependencies") if isinstance(chart, dict) else None
    out = []
    for dep in deps if isinstance(deps, list) else []:
        if isinstance(dep, dict) and dep.get("name"):
            out.append(Dependency(str(dep["name"]), str(dep.get("repository") or "").strip()))
    return out


def _same_url(a: str, b: str) -> bool:
    """helm's urlutil.Equal for what matters here: the same URL but for a trailing slash."""
    return a.rstrip("/") == b.rstrip("/")


def _platform_repositories(settings: CmpSettings) -> list[dict[str, Any]]:
    path = settings.helm_repositories
    if not path:
        return []
    import yaml

    from driftguard.manifests import safe_load

    try:
        doc = safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError("DRIFTGUARD_CMP_HELM_REPOSITORIES", f"cannot be read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError("DRIFTGUARD_CMP_HELM_REPOSITORIES", "is not valid YAML") from exc
    repos = doc.get("repositories") if isinstance(doc, dict) else None
    if not isinstance(repos, list) or not all(isinstance(r, dict) and r.get("url") for r in repos):
        raise ConfigError(
            "DRIFTGUARD_CMP_HELM_REPOSITORIES",
            "must be helm's repositories.yaml (repositories: [{name, url, ...}])",
        )
    return repos


def prepare(chart: Any, missing: list[str], *, settings: CmpSettings, env: dict[str, str]) -> list[str]:
    """Set up the render's helm home for ``helm dependency build``; the extra flags it needs.

    ``missing``: the dependencies not in ``charts/``; only these make the build run at all.
    """
    deps = chart_dependencies(chart)
    fetched = [d for d in deps if d.name in missing and d.fetched]
    if settings.helm_vendored_only and fetched:
        raise InputError(
            f"chart dependenc{'ies' if len(fetched) > 1 else 'y'} {', '.join(d.shown() for d in fetched)} "
            f"{'are' if len(fetched) > 1 else 'is'} not vendored in charts/, and the platform allows vendored "
            "dependencies only (DRIFTGUARD_CMP_HELM_VENDORED_ONLY); run `helm dependency build` and commit charts/"
        )
    platform = _platform_repositories(settings)
    entries: list[dict[str, Any]] = []
    for dep in deps:
        repo = dep.repository
        if repo.startswith(("http://", "https://")):
            if any(_same_url(e["url"], repo) for e in entries):
                continue
            entry: dict[str, Any] = {"name": f"driftguard-{len(entries)}", "url": repo}
            known = next((p for p in platform if _same_url(str(p["url"]), repo)), None)
            if known is not None:
                entry.update({k: known[k] for k in _CREDENTIAL_KEYS if k in known})
            entries.append(entry)
        elif repo.startswith(("@", "alias:")):
            name = repo[1:] if repo.startswith("@") else repo[len("alias:") :]
            known = next((p for p in platform if str(p.get("name") or "") == name), None)
            if known is None:
                if dep.name in missing:
                    raise InputError(
                        f"chart dependency {dep.name} refers to the repository {repo!r}, which the platform does "
                        "not define (DRIFTGUARD_CMP_HELM_REPOSITORIES); use the repository's URL, or vendor the "
                        "chart into charts/"
                    )
                continue
            if not any(e["name"] == name for e in entries):
                entries.append(
                    {"name": name, **{k: known[k] for k in ("url", *_CREDENTIAL_KEYS) if k in known}}
                )
    config = Path(env["HELM_CONFIG_HOME"])
    config.mkdir(mode=0o700, parents=True, exist_ok=True)
    repositories = config / "repositories.yaml"
    import yaml

    fd = os.open(repositories, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump({"apiVersion": "", "generated": "0001-01-01T00:00:00Z", "repositories": entries}, f)
    env["HELM_REPOSITORY_CONFIG"] = str(repositories)
    if settings.helm_registry_config:
        env["HELM_REGISTRY_CONFIG"] = settings.helm_registry_config
    flags = ["--skip-refresh"]  # the indexes are fetched once, by update_indexes, before the build
    hosts = {
        d.repository[len("oci://") :].split("/", 1)[0] for d in deps if d.repository.startswith("oci://")
    }
    if hosts & set(settings.helm_plain_http_registries):
        flags.append("--plain-http")
    return flags


def update_indexes(helm: str, env: dict[str, str], *, timeout: float) -> None:
    """Fetch the index of every chart repository ``prepare`` wrote, one by one (``helm repo add`` each).

    One at a time, in Chart.yaml's order, as Argo CD adds them: the first that cannot be fetched
    (unreachable, 401) is an error naming it, before the build, and the same every time.
    """
    from cmp_plugin.process import run_tool
    from driftguard.errors import RenderError
    from driftguard.manifests import safe_load

    path = Path(env.get("HELM_REPOSITORY_CONFIG", ""))
    if not path.is_file():
        return
    doc = safe_load(path.read_text(encoding="utf-8"))
    for repo in doc.get("repositories") or [] if isinstance(doc, dict) else []:
        try:
            run_tool(
                [helm, "repo", "update", str(repo["name"])],
                env=env,
                timeout=timeout,
                max_output=1 << 20,
                name="helm repo update",
            )
        except RenderError as exc:
            url = str(repo["url"])
            raise RenderError(
                f"the chart repository {_shown(url)} of the chart's dependencies could not be fetched (helm "
                "repo update); check the URL, and for a private repository its credentials in "
                "DRIFTGUARD_CMP_HELM_REPOSITORIES",
                stderr=exc.stderr.replace(url, _shown(url)),
            ) from exc


def _shown(url: str) -> str:
    """A repository URL without its user and password (a platform entry may carry them in the URL)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))

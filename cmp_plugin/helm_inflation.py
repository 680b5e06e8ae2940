"""kustomize's Helm inflation, confined: no chart field can become a helm flag or leave the checkout.

With ``--enable-helm`` (the platform's DRIFTGUARD_KUSTOMIZE_ENABLE_HELM) kustomize runs helm itself
for each ``helmCharts`` entry and each ``HelmChartInflationGenerator`` config, building the argv
from the tenant's fields (sigs.k8s.io/kustomize api/internal/builtins/HelmChartInflationGenerator.go,
``templateCommand`` / ``pullCommand``): ``releaseName`` is a bare positional, so
``--post-renderer=/bin/sh`` became helm's flag and ran a shell; ``nameTemplate`` is a Go template
helm evaluates with sprig's ``env``; ``name`` is joined onto ``chartHome`` (``../..`` leaves it).
Each field is held to what helm itself accepts for it, before kustomize starts; fields are read
as Go reads them (driftguard/gostruct.py).
"""

from __future__ import annotations

import os
import re
from typing import Any

from driftguard.errors import InputError
from driftguard.gostruct import GoStruct, fold

__all__ = ["check_chart", "check_config", "check_kustomization"]

# helm pkg/chartutil/validate_name.go ValidateReleaseName (53 characters)
_RELEASE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# a Kubernetes namespace: an RFC 1123 label
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# a chart name, or a path of such names under chartHome (no "..", no leading "-" or ".")
_CHART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)*")
# a version or a semver constraint (Masterminds/semver): never an option
_VERSION = re.compile(r"[0-9A-Za-z^~<>=*!][0-9A-Za-z.+^~<>=*!|, -]*")
_REPO = re.compile(r"(https?|oci)://[^\s\x00-\x1f\x7f]+")
_KIND = fold("HelmChartInflationGenerator")
# fields that reach helm's argv as values of a flag: still never allowed to look like one
_VALUE_FIELDS = ("kubeVersion", "description")


def check_kustomization(doc: GoStruct, here: str, root: str, origin: str) -> None:
    """Every ``helmCharts`` entry of a kustomization, with its ``helmGlobals``."""
    charts = doc.get("helmCharts")
    globals_ = doc.get("helmGlobals")
    home = globals_.get("chartHome") if isinstance(globals_, GoStruct) else None
    for i, chart in enumerate(charts if isinstance(charts, list) else []):
        if isinstance(chart, GoStruct):
            check_chart(chart, home, here, root, f"{origin} helmCharts[{i}]")


def check_config(config: GoStruct, here: str, root: str, origin: str) -> None:
    """A builtin plugin config: a ``HelmChartInflationGenerator`` is a chart with its own globals."""
    kind = config.get("kind")
    if isinstance(kind, str) and fold(kind) == _KIND:
        check_chart(config, config.get("chartHome"), here, root, f"{origin} ({kind})")


def check_chart(chart: GoStruct, home: Any, here: str, root: str, where: str) -> None:
    """InputError naming the field when one could be read by helm as a flag or leads outside."""

    def text(field: str) -> str:
        value = chart.get(field)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise InputError(f"{where}: {field} must be a string")
        return value

    def refuse(field: str, value: str, rule: str) -> InputError:
        shown = value if len(value) <= 80 and value.isprintable() else repr(value[:80]) + "..."
        return InputError(f"{where}: {field} {shown} is refused: {rule}")

    if text("nameTemplate"):
        raise refuse("nameTemplate", text("nameTemplate"), "helm evaluates it as a template; use releaseName")
    release = text("releaseName")
    if release and (len(release) > 53 or not _RELEASE.fullmatch(release)):
        raise refuse("releaseName", release, "not a valid Helm release name (lowercase, digits, '-', '.')")
    namespace = text("namespace")
    if namespace and (len(namespace) > 63 or not _NAMESPACE.fullmatch(namespace)):
        raise refuse("namespace", namespace, "not a valid namespace name")
    name = text("name")
    if name and not _CHART.fullmatch(name):
        raise refuse("name", name, "a chart name or a path below chartHome (no '..', no leading '-')")
    version = text("version")
    if version and (len(version) > 128 or not _VERSION.fullmatch(version)):
        raise refuse("version", version, "not a chart version or version constraint")
    repo = text("repo")
    if repo and not _REPO.fullmatch(repo):
        raise refuse("repo", repo, "only an https://, http:// or oci:// URL")
    for field in _VALUE_FIELDS:
        value = text(field)
        if value.startswith("-") or any(not c.isprintable() for c in value):
            raise refuse(field, value, "it would reach helm as an option")
    versions = chart.get("apiVersions")
    for value in versions if isinstance(versions, list) else []:
        if not isinstance(value, str) or value.startswith("-") or not value.isprintable():
            raise refuse("apiVersions", str(value), "it would reach helm as an option")
    if not isinstance(home, str | None):
        raise InputError(f"{where}: chartHome must be a string")
    base = os.path.join(here, home or "charts")  # noqa: PTH118 - real paths as strings, as confine.py
    if not _inside(base, root) or (name and not _inside(base + "/" + name, root)):
        raise InputError(f"{where}: the chart {name or '(unnamed)'} leads outside the repository checkout")


def _inside(path: str, root: str) -> bool:
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip("/") + "/")

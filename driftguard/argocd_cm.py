"""The argocd-cm a component is given, read once for all of them: a file or a mounted directory.

Argo CD reads the ConfigMap's ``data`` (argo-cd v3.5.1 util/settings/settings.go:
``GetResourceOverrides`` and ``GetResourceCompareOptions`` read ``argoCDCM.Data``); driftguard
reads the same ``data`` from what the platform mounts:

- a YAML or JSON file holding the ConfigMap (or only its ``data``): exactly one document;
- the ConfigMap mounted as a volume, a directory with a file per key. The kubelet's own entries
  there (``..data``, ``..<timestamp>``) start with ``..``, which no ConfigMap key may
  (k8s.io/apimachinery validation ``IsConfigMapKey``), so those are skipped and every other file
  is a key, as in Argo CD's ``Data``.

The rules themselves come from ``driftguard.ignore.rules_from_argocd_cm``. Every failure is a
``ConfigError`` naming the setting that gave the path (an environment variable or a flag).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driftguard.errors import ConfigError, DriftguardError
from driftguard.ignore import IgnoreRule, rules_from_argocd_cm
from driftguard.manifests import load_file

__all__ = ["SETTING", "load_argocd_cm", "system_rules_from_file"]

SETTING = "DRIFTGUARD_ARGOCD_CM_FILE"
"""The variable the notifier and the analysis provider read the path from."""
_KUBELET = ".."
"""The prefix of the kubelet's own entries in a mounted ConfigMap (no key may start with it)."""


def load_argocd_cm(path: str | Path, *, setting: str = SETTING) -> dict[str, Any]:
    """The mapping ``rules_from_argocd_cm`` reads: the whole ConfigMap from a file, or its keys from a directory."""
    where = Path(path)
    try:
        if where.is_dir():
            return {
                f.name: f.read_text()
                for f in sorted(where.iterdir())
                if not f.name.startswith(_KUBELET) and f.is_file()
            }
        if not where.is_file():
            raise ConfigError(setting, f"{path} does not exist")
        docs = load_file(where, require_identity=False)
        if len(docs) != 1:
            raise ConfigError(setting, f"{path}: expected one ConfigMap, found {len(docs)} documents")
        return docs[0].obj
    except ConfigError:
        raise
    except (DriftguardError, ValueError, OSError) as exc:
        raise ConfigError(setting, f"{path}: {exc}") from exc


def system_rules_from_file(path: str | Path, *, setting: str = SETTING) -> list[IgnoreRule]:
    """argocd-cm's ignore rules (and knownTypeFields, compareoptions); none when ``path`` is empty."""
    if path == "":
        return []
    data = load_argocd_cm(path, setting=setting)
    try:
        return rules_from_argocd_cm(data)
    except (DriftguardError, ValueError) as exc:
        raise ConfigError(setting, f"{path}: {exc}") from exc

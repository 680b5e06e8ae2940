"""The guard policy: the documented examples load, and looser/tighter is decided per guard."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cmp_plugin import policy
from cmp_plugin.params import PARAMETERS
from driftguard.errors import ConfigError, GuardRefusal

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = {p.name: p.default for p in PARAMETERS}
ADMIN = {"kustomize-load-restrictor": "LoadRestrictionsRootOnly", "kustomize-enable-helm": False}


def examples() -> list[str]:
    text = (ROOT / "docs" / "security.md").read_text()
    return [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if b.startswith("projects:")]


@pytest.mark.parametrize("index", range(2))
def test_the_documented_policies_load(tmp_path: Path, index: int) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(examples()[index])
    loaded = policy.load(str(path))
    assert loaded.entries and loaded.entries[-1].project == "*"


def enforce(text: str, tmp_path: Path, project: str, **tenant: object) -> dict[str, object]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    params = {**DEFAULTS, **tenant}
    return policy.enforce(
        params, frozenset(tenant), project=project, policy=policy.load(str(path)), admin=ADMIN
    )


CLOSED = (
    'projects:\n  - project: "prod-*"\n    tenants-may-loosen: false\n'
    "    parameters:\n      explicit-keys: [enabled]\n"
    '  - project: "*"\n'
)


@pytest.mark.parametrize(
    ("name", "loose", "tight"),
    [
        ("allow-empty", True, False),
        ("max-prune-ratio", 0.5, 0.1),
        ("max-prune-count", 11, 3),
        ("implicit-defaults", "off", "refuse"),
        ("protected-kinds", ["Namespace"], [*DEFAULTS["protected-kinds"], "Service"]),
        ("explicit-keys", ["replicas"], ["enabled", "replicas"]),
    ],
)
def test_a_closed_entry_refuses_loosening_and_allows_tightening(
    tmp_path: Path, name: str, loose: object, tight: object
) -> None:
    with pytest.raises(GuardRefusal, match=re.escape("projects[0] (project 'prod-*')")):
        enforce(CLOSED, tmp_path, "prod-a", **{name: loose})
    assert enforce(CLOSED, tmp_path, "prod-a", **{name: tight})[name] == tight
    assert enforce(CLOSED, tmp_path, "dev-a", **{name: loose})[name] == loose  # the * entry is open


def test_admin_only_options_are_never_the_tenants(tmp_path: Path) -> None:
    open_ = 'projects:\n  - project: "*"\n    tenants-may-loosen: true\n'
    with pytest.raises(GuardRefusal, match="only the platform sets it"):
        enforce(open_, tmp_path, "x", **{"kustomize-load-restrictor": "LoadRestrictionsNone"})
    with pytest.raises(GuardRefusal, match="only the platform sets it"):
        enforce(open_, tmp_path, "x", **{"kustomize-enable-helm": True})
    bad = 'projects:\n  - project: "*"\n    parameters:\n      kustomize-enable-helm: {default: true, tenants-may-loosen: true}\n'
    with pytest.raises(ConfigError, match="can never loosen"):
        enforce(bad, tmp_path, "x")


def test_unknown_keys_and_non_guard_parameters_are_configuration_errors(tmp_path: Path) -> None:
    for text in (
        "project: x\n",
        'projects:\n  - project: "*"\n    tenants_may_loosen: false\n',
        'projects:\n  - project: "*"\n    parameters:\n      values-files: [a]\n',
        'projects:\n  - project: "*"\n    parameters:\n      max-prune-ratio: 7\n',
    ):
        with pytest.raises(ConfigError, match="DRIFTGUARD_CMP_POLICY"):
            enforce(text, tmp_path, "x")

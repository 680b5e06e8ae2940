"""Parameters no Argo CD Application should crash the plugin with: a clear error, never a traceback.

Argo CD hands ``plugin.parameters`` over as JSON (``ARGOCD_APP_PARAMETERS``); Go's encoder writes
a NUL byte of a parameter as ``\\u0000``. A kube-version component past 64 bits is an error for
apimachinery's ``util/version`` (``strconv.ParseUint(comp, 10, 0)``), and one over 4,300 digits
made Python's ``int()`` raise.
"""

from __future__ import annotations

import pytest

from .conftest import Generate


@pytest.mark.parametrize(
    ("what", "params"),
    [
        ("kube-version of 5,000 digits", '[{"name": "kube-version", "string": "1.' + "9" * 5000 + '"}]'),
        ("kube-version past 64 bits", '[{"name": "kube-version", "string": "1.18446744073709551616"}]'),
        ("a NUL in the namespace", '[{"name": "namespace", "string": "a\\u0000b"}]'),
        ("a NUL in a --set value", '[{"name": "set", "map": {"a": "x\\u0000y"}}]'),
        ("a NUL in a --set key", '[{"name": "set", "map": {"a\\u0000": "x"}}]'),
        ("a lone surrogate in the namespace", '[{"name": "namespace", "string": "a\\ud800"}]'),
        ("a lone surrogate in a values file", '[{"name": "values-files", "array": ["\\udc00.yaml"]}]'),
        ("nested 30,000 deep", "[" * 30000 + "]" * 30000),
    ],
)
def test_a_parameter_no_tool_can_take_is_a_clear_error(generate: Generate, what: str, params: str) -> None:
    proc = generate("charts/web", ARGOCD_APP_PARAMETERS=params)
    assert "Traceback" not in proc.stderr, (what, proc.stderr[-400:])
    assert proc.returncode == 2, (what, proc.stderr)
    assert proc.stderr.startswith("driftguard: error: "), proc.stderr
    assert "parameter" in proc.stderr.splitlines()[0] or "ARGOCD_APP_PARAMETERS" in proc.stderr


def test_a_kube_version_within_64_bits_still_renders(generate: Generate) -> None:
    """The control: the largest component ParseUint takes is no error."""
    proc = generate("charts/web", [{"name": "kube-version", "string": "1.18446744073709551615"}])
    assert "kube-version" not in proc.stderr, proc.stderr

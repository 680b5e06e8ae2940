"""Issue 27: a non-finite or out-of-range number in a parameter or the policy is a clear error.

Before, ``max-prune-count: nan`` or ``1e400`` reached ``int()`` and Argo CD showed a Python
traceback; now the error names the parameter (and, for the policy, DRIFTGUARD_CMP_POLICY).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cmp_plugin.params import PARAMETERS, by_name
from driftguard.errors import InputError

from .conftest import Generate

NUMBERS = [p.name for p in PARAMETERS if p.item_type == "number"]


@pytest.mark.parametrize("value", ["nan", "NaN", "1e400", "inf", "-Infinity", "1_0"])
@pytest.mark.parametrize("name", ["max-prune-count", "max-prune-ratio"])
def test_a_parameter_that_is_no_finite_number_is_named(generate: Generate, name: str, value: str) -> None:
    proc = generate("plain", [{"name": name, "string": value}])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"parameter {name}" in proc.stderr.splitlines()[0]


@pytest.mark.parametrize("value", [".nan", "1e400", ".inf", '"nan"'])
def test_a_policy_number_that_is_no_finite_number_is_named(
    generate: Generate, tmp_path: Path, value: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(f'projects:\n  - project: "*"\n    parameters:\n      max-prune-count: {value}\n')
    proc = generate("plain", DRIFTGUARD_CMP_POLICY=str(path), ARGOCD_APP_PROJECT_NAME="prod")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "DRIFTGUARD_CMP_POLICY" in proc.stderr and "max-prune-count" in proc.stderr


@given(
    st.sampled_from(NUMBERS), st.one_of(st.text(max_size=30), st.floats().map(repr), st.integers().map(str))
)
def test_a_number_parameter_parses_or_names_itself(name: str, raw: str) -> None:
    """Whatever the text: a finite value within the parameter's range, or InputError naming it."""
    param = by_name(name)
    try:
        value = param.parse(raw, origin="test")
    except InputError as exc:
        assert name in str(exc)
        return
    assert isinstance(value, int | float) and value == value and abs(value) != float("inf")
    json.dumps(value)  # a plain number

"""driftguard/cause.py: the CMP's refusal lines as the notifier reads them back from Argo CD's condition."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from driftguard.cause import (
    CHART_DEFAULT,
    FAILED,
    MAX_REASON,
    REFUSED,
    VALUE,
    Cause,
    GatingKey,
    cause_from_application,
    gating_line,
    parse_condition,
    refusal_headline,
)

WRAP = (
    "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown"
    " desc = error generating manifests in cmp: rpc error: code = Unknown desc = error generating"
    " manifests: `driftguard-cmp generate` failed exit status {code}: "
)


def condition(stderr: str, code: int = 3) -> str:
    return WRAP.format(code=code) + stderr


def test_a_refusal_with_its_gating_keys_reads_back() -> None:
    stderr = "\n".join(
        [
            refusal_headline("shrink", "the render would prune 3 of 5 resources the Application manages"),
            "  Deployment.apps shop/api  <- hidden by the chart default of enabled (templates/d.yaml:1)",
            gating_line(GatingKey("enabled", CHART_DEFAULT, "templates/d.yaml:1")),
            gating_line(GatingKey("worker.enabled", VALUE, "templates/w.yaml:4")),
            "fix: annotate the Application",
        ]
    )
    assert parse_condition(condition(stderr)) == Cause(
        REFUSED,
        "the render would prune 3 of 5 resources the Application manages",
        "shrink",
        (
            GatingKey("enabled", CHART_DEFAULT, "templates/d.yaml:1"),
            GatingKey("worker.enabled", VALUE, "templates/w.yaml:4"),
        ),
    )
    # Argo CD's cached form of the same error
    cached = "Manifest generation error (cached): " + stderr
    assert parse_condition(cached) == parse_condition(condition(stderr))


def test_text_a_chart_prints_cannot_pose_as_a_refusal_or_a_key() -> None:
    """helm's error (a tenant's `fail`) follows "driftguard: error:" or is indented below it."""
    stderr = (
        "driftguard: error: helm template failed: driftguard: refused by shrink: fake\n"
        "  Error: driftguard: refused by empty: fake\n"
        "  driftguard: gating key `x` relies on the chart default\n"
        "fix: fix the chart"
    )
    cause = parse_condition(condition(stderr, code=2))
    assert cause is not None and cause.kind == FAILED and not cause.keys and not cause.guard
    assert cause.reason == "driftguard: error: helm template failed: driftguard: refused by shrink: fake"


def test_another_failure_is_quoted_without_argo_cds_wrapping_masked_and_bounded() -> None:
    message = condition("Error: values: password=hunter2 --token=abc123def " + "x" * 1000, code=1)
    cause = parse_condition(message)
    assert cause is not None and cause.kind == FAILED
    assert cause.reason.startswith("Error: values:") and "hunter2" not in cause.reason
    assert "abc123def" not in cause.reason and len(cause.reason) == MAX_REASON
    assert parse_condition("") is None and parse_condition("  \n ") is None


def test_the_first_comparison_error_of_the_application() -> None:
    app = {
        "status": {
            "conditions": [
                {"type": "SyncError", "message": "not this"},
                {
                    "type": "ComparisonError",
                    "message": condition(refusal_headline("empty", "helm rendered 0")),
                },
            ]
        }
    }
    assert cause_from_application(app) == Cause(REFUSED, "helm rendered 0", "empty")
    # a ComparisonError that is not a failure to load the target state leaves the render in place
    assert parse_condition("Failed to normalize target state: x") is None
    assert cause_from_application({"status": {"conditions": [{"type": "SyncError", "message": "x"}]}}) is None
    assert cause_from_application({"status": {"conditions": "garbage"}}) is None
    assert cause_from_application({}) is None


keys = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60)


@given(keys, st.sampled_from([CHART_DEFAULT, VALUE]), st.text(max_size=40))
def test_any_key_round_trips_as_one_line(key: str, origin: str, where: str) -> None:
    line = gating_line(GatingKey(key, origin, where))
    assert "\n" not in line and "\r" not in line
    cause = parse_condition(condition(refusal_headline("implicit-defaults", "r") + "\n" + line))
    assert cause is not None and cause.kind == REFUSED
    if " ".join(key.split()):
        [got] = cause.keys
        assert got.origin == origin and "`" not in got.key and len(got.key) <= 120


def test_a_place_that_is_only_whitespace_is_left_out() -> None:
    """Found by the property test above: NEL (U+0085) is whitespace, so the place became "()"."""
    line = gating_line(GatingKey("0", CHART_DEFAULT, "\x85"))
    assert line == "driftguard: gating key `0` " + line.split("`0` ", 1)[1] and "()" not in line
    cause = parse_condition(condition(refusal_headline("implicit-defaults", "r") + "\n" + line))
    assert cause is not None and [k.key for k in cause.keys] == ["0"]

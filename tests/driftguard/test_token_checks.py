"""The one token comparison every endpoint uses (``driftguard.service``): equality, empty never matching."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from driftguard.service import bearer_matches, secret_matches

text = st.text(max_size=24)


@given(text, st.lists(text, max_size=4))
def test_secret_matches_is_equality_with_a_non_empty_secret(given_: str, secrets: list[str]) -> None:
    assert secret_matches(given_, *secrets) == (given_ in [s for s in secrets if s])


@given(st.lists(text, max_size=4), text, st.booleans())
def test_bearer_matches_is_the_bearer_header_of_a_non_empty_token(
    tokens: list[str], other: str, own: bool
) -> None:
    header = f"Bearer {tokens[0]}" if own and tokens else other
    assert bearer_matches(header, *tokens) == (header in [f"Bearer {t}" for t in tokens if t])


def test_an_empty_token_never_opens_anything() -> None:
    assert not bearer_matches("Bearer ", "")
    assert not secret_matches("", "")
    assert bearer_matches("Bearer s3cr3t-token-of-16+", "", "s3cr3t-token-of-16+")

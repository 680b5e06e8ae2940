"""redact.py is linear and bounded (issue 31): work is counted, never timed.

The attack: a ConfigMap value ``k: x`` + 32 KB of blanks + ``y`` held the GIL for 3.7 s in the line
rule (a lazy ``.*?`` then ``[ \\t]*$`` re-read the blanks from every position), and a drift gate
with a 2 s deadline answered after 8-11 s. Here every pass over a text is charged to a
:class:`~driftguard.redact.Work` meter, every unbounded repeat of the patterns is possessive
(checked on the compiled patterns' parse trees), and a text over ``MAX_TEXT`` is masked whole.
"""

from __future__ import annotations

import re
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import driftguard.redact as redact
from driftguard.redact import MAX_TEXT, WORK_FACTOR, Redactor, Work, scrub_text
from tests.helpers import examples

KEY = b"redact-key-for-tests-0123456789abcdef"
SECRET = "hunter2PLANTED"


def read(text: str) -> tuple[str, Work]:
    work = Work.for_text(text)
    return Redactor(salt=KEY).text(text, work=work), work


def test_the_blank_run_attack_is_read_a_constant_number_of_times() -> None:
    for text in (
        "k: x" + " " * 32_000 + "y",
        "password: " + SECRET + " " * 32_000 + "y",
        "password=" + SECRET + "\t" * 32_000 + "y\n" * 2,
        '"password": "' + "\\" * 30_000,
        "a" * 32_000 + "=b",
        "http://" + "a" * 30_000,
    ):
        out, work = read(text)
        # one charge per pass, the same for every length: flat text is read 5 times, never n times
        assert work.spent <= 5 * len(text), (text[:20], work.spent)
        assert SECRET not in out


def test_nested_block_scalars_cost_at_most_the_work_factor() -> None:
    # each level a YAML block scalar holding the next: read again at every level, the work grew as
    # length^1.5; past the meter's limit the nested text is masked whole
    depth = 400
    text = "".join("  " * i + f"k{i}: |\n" for i in range(depth)) + "  " * depth + f"password: {SECRET}\n"
    out, work = read(text)
    assert work.spent <= WORK_FACTOR * len(text) + 4096
    assert SECRET not in out


def test_over_the_bound_the_whole_value_is_masked() -> None:
    text = "note: " + "x" * MAX_TEXT
    out, work = read(text)
    assert re.fullmatch(r"\*\*\*\(sha256:[0-9a-f]{8}\)", out) and work.spent == 0
    assert scrub_text(text) == "***"
    assert read("note: short")[0] == "note: short"


def _repeats(pattern: re.Pattern[str]) -> list[str]:
    """The unbounded greedy or lazy repeats in a compiled pattern (possessive ones are not listed)."""
    found: list[str] = []

    def walk(items: Any) -> None:
        for op, av in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT"):
                low, high, body = av
                if high == sre_parse.MAXREPEAT:
                    found.append(f"{name} {low},inf")
                walk(body)
            elif name in ("POSSESSIVE_REPEAT",):
                walk(av[2])
            elif name in ("SUBPATTERN",):
                walk(av[-1])
            elif name in ("BRANCH",):
                for b in av[1]:
                    walk(b)
            elif name in ("ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
                walk(av[-1] if isinstance(av, tuple) else av)

    walk(sre_parse.parse(pattern.pattern, pattern.flags).data)
    return found


def test_every_unbounded_repeat_is_possessive() -> None:
    """No pattern can backtrack into a run it already read (the 3.7 s line rule had ``.*?`` + ``[ \\t]*$``)."""
    patterns = {k: v for k, v in vars(redact).items() if isinstance(v, re.Pattern)}
    assert {"_PAIR", "_JSON_PAIR", "_INLINE_PAIR", "_URL", "_QUERY", "_TOKENISH"} <= set(patterns)
    backtracking = {k: _repeats(v) for k, v in patterns.items() if _repeats(v)}
    assert backtracking == {}


# adversarial whitespace (every blank Python knows, not only space and tab) and separators
BLANKS = st.text(alphabet=" \t\x0b\x0c\r\xa0\u2000\u3000", max_size=6)
KEYS = st.sampled_from(["password", "db_password", "API_KEY", "token", "clientSecret", "auth-token"])


@settings(max_examples=examples(300), deadline=None)
@given(
    lead=BLANKS,
    key=KEYS,
    before=BLANKS,
    sep=st.sampled_from([":", "="]),
    after=BLANKS,
    tail=BLANKS,
    quote=st.sampled_from(["", '"', "'"]),
    noise=st.lists(st.text(alphabet=" \t:=-|>\"'&?;,/\\\nabc", max_size=40), max_size=4),
)
def test_a_line_pair_is_masked_whatever_its_blanks(
    lead: str, key: str, before: str, sep: str, after: str, tail: str, quote: str, noise: list[str]
) -> None:
    # the line rule's reference (redact.py module docstring): at a line's start, optional blanks, a
    # sensitive key, blanks, ':' or '=', blanks, the value to the end of the line; here blanks are
    # any whitespace but a newline, and the value is one word (optionally quoted)
    line = f"{lead}{key}{before}{sep}{after}{quote}{SECRET}{quote}{tail}"
    text = "\n".join([*noise, line, *noise])
    out, work = read(text)
    assert SECRET not in out, (line, out)
    assert work.spent <= WORK_FACTOR * len(text) + 4096


@settings(max_examples=examples(200), deadline=None)
@given(
    key=KEYS,
    before=BLANKS,
    after=BLANKS,
    q=st.sampled_from(['"', "'"]),
    prefix=st.text(alphabet=" \t,{[:abc", max_size=10),
)
def test_a_json_pair_in_free_text_is_masked(key: str, before: str, after: str, q: str, prefix: str) -> None:
    text = f"note {prefix}{q}{key}{q}{before}:{after}{q}{SECRET}{q} trailing"
    assert SECRET not in read(text)[0]
    assert SECRET not in scrub_text(text)


@settings(max_examples=examples(200), deadline=None)
@given(
    run=st.sampled_from([" ", "\t", "\\", ":", "=", '"', "'", "-", "a", "&", "/", "\n"]),
    n=st.integers(min_value=1_000, max_value=40_000),
    head=st.sampled_from(["k: x", "password: x", '"password": "', "a=", "http://h/", "x", "- "]),
)
def test_any_long_run_is_read_a_bounded_number_of_times(run: str, n: int, head: str) -> None:
    text = head + run * n + "y"
    _, work = read(text)
    assert work.spent <= WORK_FACTOR * len(text) + 4096

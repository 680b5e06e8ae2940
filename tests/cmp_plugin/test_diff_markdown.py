"""The PR comment survives any string the repository or the PR puts in it.

Generated Application names, paths, resource names, causes and field values (newlines, ``<!--``,
backticks, pipes, emphasis, entities, mentions) are rendered into the Markdown report and read back
by a CommonMark parser with GitHub's table extension (markdown-it-py): the table has one row per
environment whose first cell reads the name, every REMOVED line reads its resource and cause, every
heading reads its environment, and nothing became HTML.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from cmp_plugin.prcheck import mdtext
from cmp_plugin.prcheck.diffreport import render_report
from cmp_plugin.prcheck.envdiff import Change, EnvDiff, Environment, Report
from cmp_plugin.prcheck.fieldchanges import FieldLine
from driftguard.manifests import ResourceKey
from tests.helpers import examples

PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# what has a meaning in Markdown, HTML or GitHub's renderer, and what breaks a line
TRICKY = [*"<>!-`|*_[]()#\\&;$@~:=+.{}\"' \t\n\r\x0b\x0c\x85\u2028\u2029\x00", "<!--", "-->", "```", "\r\n"]
hostile = st.lists(st.sampled_from(TRICKY) | st.characters(), min_size=1, max_size=12).map("".join)
word = st.text(st.characters(categories=["Ll", "Nd"]), min_size=1, max_size=6)
name = st.one_of(word, st.builds(lambda a, b, c: a + b + c, word, hostile, word), hostile)


def keys() -> st.SearchStrategy[ResourceKey]:
    return st.builds(
        ResourceKey, st.sampled_from(["", "apps"]), name, st.sampled_from(["", "payment"]) | name, name
    )


@st.composite
def reports(draw: st.DrawFn) -> Report:
    diffs = []
    names = draw(st.lists(name, min_size=1, max_size=4, unique_by=mdtext.oneline))
    for n in names:
        env = Environment(n, draw(name), appset=draw(st.sampled_from(["", "payment"])), origin=draw(name))
        d = EnvDiff(env, env)
        if draw(st.booleans()):
            d.errors["head"] = draw(name)
        else:
            d.removed = [
                Change(k, draw(st.sampled_from([""]) | name)) for k in draw(st.lists(keys(), max_size=3))
            ]
            d.added = [Change(k) for k in draw(st.lists(keys(), max_size=2))]
            fields = [
                FieldLine(draw(name), "/x", "replace", draw(name), draw(name))
                for _ in range(draw(st.integers(0, 2)))
            ]
            d.changed = [Change(k, fields=fields) for k in draw(st.lists(keys(), max_size=2))]
        diffs.append(d)
    findings: list[Any] = []
    return Report("a" * 40, "b" * 40, diffs, findings, {"head": draw(st.lists(name, max_size=2))})


def text_of(inline: Token) -> str:
    """What a reader sees of an inline token: its text and code, no markup."""
    assert inline.children is not None
    return "".join(c.content for c in inline.children if c.type in ("text", "code_inline"))


def walk(tokens: list[Token]) -> list[Token]:
    out = []
    for t in tokens:
        out.append(t)
        out += walk(t.children or [])
    return out


def rows(tokens: list[Token]) -> list[list[str]]:
    """The table body's rows, each a list of cell texts."""
    out: list[list[str]] = []
    in_body = False
    for i, t in enumerate(tokens):
        if t.type == "tbody_open":
            in_body = True
        elif t.type == "tbody_close":
            in_body = False
        elif in_body and t.type == "tr_open":
            out.append([])
        elif in_body and t.type == "inline" and tokens[i - 1].type == "td_open":
            out[-1].append(text_of(t))
    return out


def removed_lines(tokens: list[Token]) -> list[str]:
    """The text of every list item that starts with **removed** (empty text tokens aside)."""
    out = []
    for t in tokens:
        kids = [c for c in t.children or [] if not (c.type == "text" and not c.content)]
        if t.type == "inline" and kids[:2] and kids[0].type == "strong_open" and kids[1].content == "removed":
            out.append(text_of(t))
    return out


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reports())
def test_the_table_and_every_removed_line_survive_any_name(report: Report) -> None:
    md = render_report(report, fmt="markdown")
    tokens = PARSER.parse(md)
    everything = walk(tokens)
    assert not [t for t in everything if t.type in ("html_block", "html_inline")], md
    assert sum(t.type == "table_open" for t in tokens) == 1, md
    table = rows(tokens)
    assert len(table) == len(report.diffs), md
    for row, d in zip(table, report.diffs, strict=True):
        assert len(row) == 6, (row, md)
        flag = " (render failed at head)" if "head" in d.errors else ""
        assert row[0] == mdtext.oneline(d.name) + flag, (row, md)
    expected = [
        f"removed {mdtext.oneline(c.key)}" + (f" <- {mdtext.oneline(c.cause)}" if c.cause else "")
        for d in report.diffs
        for c in d.removed
    ]
    assert removed_lines(tokens) == expected, md
    headings = [
        text_of(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h3"
    ]
    assert len(headings) == len(report.diffs)
    for heading, d in zip(headings, report.diffs, strict=True):
        assert heading.startswith(f"{mdtext.oneline(d.name)} ("), (heading, md)


def test_the_issue_s_name_cannot_hide_the_production_removal() -> None:
    """A name with a newline and ``<!--`` (the report's example) is shown, escaped; the removal after it stays."""
    sneaky = Environment("staging\n<!-- hide", "envs/staging")
    prod = Environment("payment-production", "clusters/production")
    gone = ResourceKey("apps", "Deployment", "payment", "payment")
    report = Report(
        "a" * 40,
        "b" * 40,
        [
            EnvDiff(sneaky, sneaky),
            EnvDiff(prod, prod, removed=[Change(gone, "the chart default `enabled` | flipped")]),
        ],
    )
    md = render_report(report, fmt="markdown")
    tokens = PARSER.parse(md)
    assert [r[0] for r in rows(tokens)] == ["staging\\n<!-- hide", "payment-production"]
    assert removed_lines(tokens) == [
        "removed Deployment.apps payment/payment <- the chart default `enabled` | flipped"
    ]
    assert "<!--" not in md.replace("`staging\\n<!-- hide`", "")  # only inside its code span
    text = render_report(report, fmt="text")
    assert "== staging\\n<!-- hide (envs/staging)" in text and "\n<!--" not in text


def test_code_spans_and_text_round_trip() -> None:
    for value in [
        "a`b",
        "``",
        "` x `",
        " lead",
        "trail ",
        "  ",
        "a|b",
        "a\\|b",
        "<b>&amp;</b>",
        "@team $x$ ~~y~~",
    ]:
        tokens = PARSER.parse(f"- {mdtext.code(value)} and {mdtext.text(value)} end\n")
        inline = next(t for t in tokens if t.type == "inline")
        assert inline.children is not None
        codes = [c.content for c in inline.children if c.type == "code_inline"]
        assert codes == [value], (value, codes)
        assert text_of(inline) == f"{value} and {value} end", value

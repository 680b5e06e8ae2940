"""No regular expression or loop of the implicit-defaults analysis is worse than linear in its input.

Each hostile template is about a megabyte, and the scan's own work counter (regex matches and
actions handled) must grow in proportion when the input doubles. The helpers without a counter
(expression keys, .helmignore patterns, --set entries) are counted from outside: the lines of
product code they execute (tests/helpers.py ``steps``). Never seconds: a quadratic scan and a
loaded machine look alike on a clock (timing lives in bench/).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cmp_plugin.helmchart import chart_values as cv
from cmp_plugin.helmchart.helmignore import Rules, go_match
from cmp_plugin.helmchart.switches import expression_keys, scan_chart, scan_template
from tests.helpers import steps

MB = 1 << 20
DOC = (
    '{{- if .Values.svc.enabled }}\napiVersion: v1\nkind: Service\nmetadata:\n  name: {{ include "x.name" . }}\n'
    '  labels:\n    {{- include "x.labels" . | nindent 4 }}\nspec:\n  ports:\n  - port: {{ .Values.svc.port }}\n'
    "{{- end }}\n---\n"
)


def repeat(unit: str, size: int = MB) -> str:
    return unit * (size // len(unit) + 1)


HOSTILE: dict[str, Callable[[int], str]] = {
    "quote-open": lambda n: repeat('"{{ ', n),
    "open-only": lambda n: repeat("{{", n),
    "unclosed-comment": lambda n: repeat("{{/* ", n),
    "nested-ifs": lambda n: repeat("{{ if .Values.a }}\nkind: A\n", n),
    "nested-then-closed": lambda n: repeat("{{ if .Values.a }}\n", n // 2) + repeat("{{ end }}", n // 2),
    "withs-and-dots": lambda n: repeat("{{ with .Values.a }}{{ if .b.c }}\n---\nkind: B\n", n),
    "variables": lambda n: (
        repeat("{{ $v := .Values.a }}", n // 2) + repeat("{{ if $v.x }}\nkind: V\n{{ end }}", n // 2)
    ),
    "includes": lambda n: (
        "".join(
            f'{{{{ define "d{i}" }}}}{{{{ include "d{i + 1}" . }}}}\nkind: K\n{{{{ end }}}}'
            for i in range(n // 48)
        )
        + '{{ if .Values.z }}{{ include "d0" . }}{{ end }}'
    ),
    "long-expression": lambda n: "{{ if and " + repeat(".Values.a.b ", n) + "}}\nkind: X\n{{ end }}",
    "long-line": lambda n: "{{ if .Values.a }}\n" + repeat(" ", n) + "\nkind: X\n{{ end }}",
    "separators": lambda n: repeat("---\n", n),
    "raw-string": lambda n: "{{ `" + repeat("}} ", n),
    "else-chains": lambda n: (
        "{{ if .Values.a }}" + repeat("{{ else if .Values.b }}\nkind: E\n", n) + "{{ end }}"
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_templates_scan_in_linear_time(name: str) -> None:
    make = HOSTILE[name]
    small, big = make(MB // 2), make(MB)
    w_big = scan_template(big).work
    w_small = scan_template(small).work
    assert w_big <= 2.2 * w_small + 100, f"{name}: work {w_small} -> {w_big} when the input doubles"


def linear(work: Callable[[int], int], n: int, what: str) -> None:
    """Doubling the input (``n`` -> ``2n``) at most doubles the counted work (plus a constant)."""
    small, big = work(n), work(2 * n)
    assert small > 0, f"{what}: nothing counted"
    assert big <= 2.2 * small + 100, f"{what}: work {small} -> {big} when the input doubles"


def test_expression_keys_is_linear_in_the_expression() -> None:
    def flat(n: int) -> int:
        return steps(lambda: expression_keys("and " + " ".join(f".Values.k{i}.x" for i in range(n))))[1]

    linear(flat, 4096, "many keys")

    def deep(n: int) -> int:
        deep = ".Values." + ".".join(f"p{i}" for i in range(n))
        half = ".Values." + ".".join(f"p{i}" for i in range(n // 2))
        keys, work = steps(lambda: expression_keys("and " + deep + " " + half))
        assert keys == [deep[len(".Values.") :]]
        return work

    linear(deep, 4096, "a deep path and its prefix")


def test_helmignore_patterns_cannot_backtrack() -> None:
    def pattern(n: int) -> str:
        return "*a" * n + "b"

    # 31 a's cannot meet 40 "*a": the match walks the whole name (a backtracking matcher explodes here)
    def name(n: int) -> str:
        return "a" * 30 + "x" * n + "ab"

    assert not go_match(pattern(40), name(10))
    linear(lambda n: steps(lambda: go_match(pattern(40), name(n)))[1], 2000, "a longer name")
    linear(lambda n: steps(lambda: go_match(pattern(n), name(2000)))[1], 20, "more stars")
    rules = Rules("\n".join(f"*{i}*x*y*z" for i in range(200)))
    linear(lambda n: steps(lambda: rules.keeps("templates/" + "q" * n))[1], 250, "a longer path")


def test_a_helmignored_hostile_template_is_never_read(tmp_path: Path) -> None:
    chart = tmp_path / "c"
    (chart / "templates" / "big").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (chart / ".helmignore").write_text("big/\n")
    (chart / "templates" / "big" / "t.yaml").write_text(HOSTILE["quote-open"](3 * MB))
    scan = scan_chart(chart)
    assert scan.ignored == 1 and scan.templates == 0 and scan.work == 0


def chain_chart(root: Path, n: int) -> Path:
    """A chart whose ``n`` gates each include the head of a chain of ``n`` named templates."""
    chart = root / f"c{n}"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    helpers = "".join(
        f'{{{{ define "d{i}" }}}}{{{{ include "d{i + 1}" . }}}}{{{{ end }}}}\n' for i in range(n)
    )
    helpers += f'{{{{ define "d{n}" }}}}\nkind: Deep\n{{{{ end }}}}\n'
    (chart / "templates" / "_helpers.tpl").write_text(helpers)
    uses = "".join(
        f'---\n{{{{ if .Values.k{i} }}}}\n{{{{ include "d0" . }}}}\n{{{{ end }}}}\n' for i in range(n)
    )
    (chart / "templates" / "use.yaml").write_text(uses)
    return chart


def test_a_chain_of_named_templates_resolves_in_linear_time(tmp_path: Path) -> None:
    n = 20_000
    small, big = scan_chart(chain_chart(tmp_path, n // 2)), scan_chart(chain_chart(tmp_path, n))
    assert len(big.gates) == n and big.gates[0].resources == ("Deep",)
    # n gates over a chain of n templates: quadratic if each gate walked the chain again
    assert big.work <= 2.2 * small.work + 100, f"work {small.work} -> {big.work} when the chart doubles"


def test_set_values_and_chart_yaml_scale() -> None:
    def work(n: int) -> int:
        doc, counted = steps(lambda: cv.set_values([f"k{i}.a.b=true" for i in range(n)]))
        assert len(doc) == n and doc["k0"] == {"a": {"b": True}}
        return counted

    linear(work, 5000, "more --set entries")

#!/usr/bin/env python3
"""Seconds the implicit-defaults analysis spends on hostile inputs, at two sizes, same run.

tests/cmp_plugin/test_gating_limits.py holds each of these to linear *work* (counted, never timed);
this prints the time the same calls take, and the ratio when the input doubles (about 2 when
linear, about 4 when quadratic). Usage: ``.venv/bin/python bench/hostile_inputs.py``; the figures
move with the machine's load, which is printed with them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cmp_plugin.helmchart import chart_values as cv
from cmp_plugin.helmchart.helmignore import Rules, go_match
from cmp_plugin.helmchart.switches import expression_keys, scan_template

MB = 1 << 20


def repeat(unit: str, size: int) -> str:
    return unit * (size // len(unit) + 1)


CASES: dict[str, Callable[[int], Callable[[], object]]] = {
    "template: quote-open": lambda n: lambda: scan_template(repeat('"{{ ', n)),
    "template: nested ifs": lambda n: lambda: scan_template(repeat("{{ if .Values.a }}\nkind: A\n", n)),
    "template: else-if chain": lambda n: (
        lambda: scan_template(
            "{{ if .Values.a }}" + repeat("{{ else if .Values.b }}\nkind: E\n", n) + "{{ end }}"
        )
    ),
    "expression keys": lambda n: (
        lambda: expression_keys("and " + " ".join(f".Values.k{i}.x" for i in range(n // 16)))
    ),
    ".helmignore pattern": lambda n: lambda: go_match("*a" * 40 + "b", "a" * 30 + "x" * (n // 256) + "ab"),
    ".helmignore rules": lambda n: (
        lambda: Rules("\n".join(f"*{i}*x*y*z" for i in range(200))).keeps("templates/" + "q" * (n // 4096))
    ),
    "--set entries": lambda n: lambda: cv.set_values([f"k{i}.a.b=true" for i in range(n // 20)]),
}


def best_of_three(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'input':<26} {'0.5 MB s':>9} {'1 MB s':>9} {'ratio':>6}")
    for name, make in CASES.items():
        half, whole = best_of_three(make(MB // 2)), best_of_three(make(MB))
        print(f"{name:<26} {half:>9.3f} {whole:>9.3f} {whole / half if half else float('nan'):>6.2f}")


if __name__ == "__main__":
    main()

"""No docstring or comment in ``operator/agentrun`` quotes a measured figure.

A timing or ratio measured on one machine on one day rots as the code, its libraries and the
machine change, while the docstring goes on stating it. The docstrings say why a choice was made;
the figures live in bench/README.md (*Figures behind the docstrings*), beside the commands that
produce them.

A figure is, in a docstring (any string statement: a module's, a class's, a function's, or the
one after an assignment) or a comment:

- a duration under a second: a number then ``ns``, ``µs``, ``us`` or ``ms`` (``0.3 ms``,
  ``~50 µs``, ``5000 ms``); seconds are not figures, they are how TTLs and timeouts are set;
- a ratio: a number then ``x`` (``1.2x``, ``3x more``);
- a percentage: a number then ``%`` (``3 %``);
- a throughput: a number then a byte unit per second (``35 MB/s``);
- a date (``2026-12-01``), which is how a measurement says when it was taken.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from tests.docs.samples import ROOT

PACKAGE = ROOT / "operator" / "agentrun"
FIGURE = re.compile(
    r"\d(?:[\d,]*\d)?(?:\.\d+)?\s?(?:ns|µs|us|ms)\b"  # a duration under a second
    r"|\b\d+(?:\.\d+)?x\b"  # a ratio
    r"|\d\s?%"  # a percentage
    r"|\d\s?[KMG]i?B/s\b"  # a throughput
    r"|\b20\d\d-[01]\d-[0-3]\d\b"  # a date
)
SOURCES = sorted(PACKAGE.rglob("*.py"))


def figures(source: str) -> list[tuple[int, str]]:
    """Each figure in the docstrings and comments of ``source``: its line and the text."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for offset, line in enumerate(node.value.value.splitlines()):
                found.extend((node.lineno + offset, m.group(0)) for m in FIGURE.finditer(line))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found.extend((token.start[0], m.group(0)) for m in FIGURE.finditer(token.string))
    return sorted(found)


@pytest.mark.parametrize(
    "text",
    [
        '"""Took 0.3 ms."""',
        '"""About 1.2x a SET."""',
        '"""measured 2026-12-01"""',
        '"""~50 µs a pair"""',
        "X = 1\n'''costs 3 % more'''",
        "x = 1  # ~8 us a call",
        '"""compresses ~35 MB/s"""',
    ],
)
def test_a_figure_is_found(text: str) -> None:
    assert figures(text)


@pytest.mark.parametrize(
    "text",
    [
        '"""A lease of 60 s, renewed 20 s before it lapses."""',
        '"""Every 16th segment; 32 KB of context; 512 MiB at most."""',
        "x = '100%'  # a value, not a docstring",
        '"""Version 1.2 of the format, sha256 of the bytes, 2x2 grid."""',
    ],
)
def test_what_is_not_a_figure(text: str) -> None:
    assert figures(text) == []


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_docstring_quotes_a_figure(source: Path) -> None:
    found = figures(source.read_text())
    assert found == [], "move the figures to bench/README.md (Figures behind the docstrings)"

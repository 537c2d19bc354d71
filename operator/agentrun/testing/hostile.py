"""Identifiers chosen to break naive key encodings: separators, globs, hash tags, quoting."""

from __future__ import annotations

HOSTILE_IDS: tuple[str, ...] = (
    "a:b",
    "a",
    "b:c",
    "a:b:c",
    "*",
    "run*",
    "{tag}",
    "{",
    "}",
    "a/b",
    "a b",
    "  ",
    "'; DROP TABLE runs; --",
    '"quoted"',
    "100%",
    "%s",
    "_",
    "\\",
    "ünïcødé-走る-🚀",
    "e\u0301",
    "\u00e9",
    "x" * 1000,
)

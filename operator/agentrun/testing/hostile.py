"""Identifiers chosen to break naive key encodings: separators, globs, hash tags, quoting."""

from __future__ import annotations

import random

from agentrun._identifiers import MAX_ID_BYTES

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

UNUSABLE_IDS: tuple[str, ...] = (
    "run-\udcff",  # what Python makes of the byte 0xff in a command-line argument
    "run-\x00",
    "r" * (MAX_ID_BYTES + 1),
    "é" * (MAX_ID_BYTES // 2 + 1),  # within the limit in characters, over it in UTF-8 bytes
)
"""Tenants and run ids every store refuses (``ConfigurationError``) before it does anything."""


def longest(limit: int, prefix: str) -> str:
    """``prefix`` (ASCII) padded to exactly ``limit`` UTF-8 bytes with text that compresses
    badly (two-byte characters in a random order seeded by the prefix): the worst case for an
    index that compresses long entries."""
    chosen = random.Random(prefix)
    fill = limit - len(prefix)
    pad = "".join(chr(chosen.randrange(0x100, 0x800)) for _ in range(fill // 2))
    return prefix + "x" * (fill % 2) + pad

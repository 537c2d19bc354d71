"""JSON from the API server, cut where one object nests deeper than anything can walk.

The API server keeps what a CRD lets through, and a field the schema cannot bound (an HTTP tool's
JSON schema, or any field of an object written under an older CRD) may nest thousands of levels
deep in a few kilobytes. Python's decoder, and every walk after it (kopf's copies and diffs, a
model's validation, the next encode), recurses once per level: one such object in a list or a
watch event would raise ``RecursionError`` where kopf reads the stream, which ends the operator,
and every replica after it, for as long as the object exists.

So every body the operator reads from the API server is decoded here: a list or object deeper
than ``MAX_DEPTH`` (counted from the top of the body) is replaced by the string ``TOO_DEEP``, and
the rest of the body, every other object of a list included, is read as it is. Whoever reads an
object then finds the cut fields with ``cut_fields`` and reports them on that object, and names
the fields a model refuses with ``field_errors``: one way to name a field of an object.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from pydantic import ValidationError

MAX_DEPTH = 100
"""Levels of lists and objects kept, counted from the top of a body: a list and a watch event
wrap an object in two levels, and no field the operator reads is more than a few dozen deep."""

TOO_DEEP = f"<nested deeper than {MAX_DEPTH} levels: not read>"
"""What a cut list or object is read as."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _depth(text: str) -> int:
    """How deep ``text``'s lists and objects nest, without decoding it: strings dropped, then a
    running sum over the brackets left. A body with fewer opening brackets than ``MAX_DEPTH``
    (a watch event, mostly) cannot nest deeper and is not scanned."""
    if text.count("{") + text.count("[") <= MAX_DEPTH:
        return 0
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _cut(text: str) -> str:
    """``text`` with every list or object that opens below ``MAX_DEPTH`` replaced by
    ``TOO_DEEP``, as a JSON string."""
    kept: list[str] = []
    depth = 0
    start = 0  # where the text still to be kept begins
    for token in _TOKEN.finditer(text):
        step = _STEP.get(token.group())
        if step is None:
            continue
        depth += step
        if step > 0 and depth == MAX_DEPTH + 1:
            kept.append(text[start : token.start()])
        elif step < 0 and depth == MAX_DEPTH:
            kept.append(json.dumps(TOO_DEEP))
            start = token.end()
    kept.append(text[start:])
    return "".join(kept)


def loads(data: str | bytes) -> Any:
    """Decode the JSON ``data``, every list or object deeper than ``MAX_DEPTH`` read as
    ``TOO_DEEP``.

    Args:
        data: A body the API server sent: an object, a list of them or a watch event.

    Returns:
        What ``json.loads`` returns, with the cut fields in place.

    Raises:
        ValueError: ``data`` is not JSON.
    """
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return json.loads(_cut(text) if _depth(text) > MAX_DEPTH else text)


def cut_fields(value: Any, where: str) -> list[str]:
    """The paths, under ``where``, of the fields ``loads`` cut out of ``value`` (a field written
    as ``TOO_DEEP`` reads the same: the object cannot be told from a cut one, and is refused
    alike)."""
    found: list[str] = []
    todo: list[tuple[Any, str]] = [(value, where)]
    while todo:
        each, path = todo.pop()
        if each == TOO_DEEP:
            found.append(path)
        elif isinstance(each, dict):
            todo.extend((inner, f"{path}.{key}") for key, inner in each.items())
        elif isinstance(each, list):
            todo.extend((inner, f"{path}[{index}]") for index, inner in enumerate(each))
    return sorted(found)


def shortened(path: str, most: int = 120) -> str:
    """``path`` as a message shows it: a path to a cut field repeats a key for every level."""
    return path if len(path) <= most else path[: most - 1] + "…"


def _shown(part: str | int) -> str:
    """A part of a field's path as a message shows it: a key holding a control character or a
    bidirectional override (which could make a message read other than it is) escaped."""
    text = str(part)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def field_errors(error: ValidationError, where: str) -> str:
    """What a model refused in an object read from the API server, each field named by its path
        under ``where`` as kubectl would name it (``spec.budget.window: ...``; a rule about a whole
    object names that object)."""
    return "; ".join(
        f"{'.'.join(_shown(part) for part in (where, *each['loc']))}: {each['msg']}"
        for each in error.errors()
    )

"""What ``agentrun.operator._nesting`` reads of a body nested too deep: the rest of it."""

from __future__ import annotations

import json

from agentrun.operator._nesting import MAX_DEPTH, TOO_DEEP, cut_fields, loads


def _nested(depth: int) -> str:
    return '{"a":' * depth + '"x"' + "}" * depth


def test_a_list_keeps_every_object_and_cuts_only_the_field_nested_too_deep() -> None:
    deep = '{"metadata":{"name":"deep"},"spec":{"h":' + _nested(5000) + "}}"
    tricky = '{"metadata":{"name":"tricky"},"spec":{"s":"[[{{\\"]]"}}'
    body = '{"kind":"List","items":[' + deep + "," + tricky + "]}"
    decoded = loads(body.encode())
    first, second = decoded["items"]
    assert second == json.loads(tricky)  # brackets in strings are text, not nesting
    [cut] = cut_fields(first, "")
    assert cut == ".spec.h" + ".a" * (MAX_DEPTH - 4)  # items, the object and spec came first
    assert first["metadata"] == {"name": "deep"}


def test_a_body_within_the_bound_is_read_as_json_reads_it() -> None:
    body = json.dumps({"items": [{"spec": {"x": [1, {"y": "z"}]}}]})
    assert loads(body) == json.loads(body)
    assert cut_fields(loads(_nested(MAX_DEPTH)), "") == []
    assert cut_fields(loads(_nested(MAX_DEPTH + 1)), "") == [".a" * MAX_DEPTH]
    assert TOO_DEEP in json.dumps(loads(_nested(MAX_DEPTH + 1)))

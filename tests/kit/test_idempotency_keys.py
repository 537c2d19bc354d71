"""Idempotency key derivation: calls that mean the same thing share a key, nothing else does, and
no key ever carries the text of an argument."""

from __future__ import annotations

import math

import pytest
from pydantic import JsonValue

from agentrun._errors import ConfigurationError
from agentrun._idempotency import KEY_PREFIX, MARKER_PREFIX, derive_key, marker_key

KEYS = ("flight", "passenger", "seat")


def key(**arguments: JsonValue) -> str:
    return derive_key("book_flight", arguments, KEYS)


def test_the_key_is_a_prefixed_sha256_digest() -> None:
    derived = key(flight="LH400", passenger="Mara", seat="12A")
    assert derived.startswith(KEY_PREFIX)
    digest = derived.removeprefix(KEY_PREFIX)
    assert len(digest) == 64
    int(digest, 16)


def test_argument_order_does_not_matter() -> None:
    assert derive_key("t", {"a": 1, "b": "x"}, ["a", "b"]) == derive_key(
        "t", {"b": "x", "a": 1}, ["b", "a"]
    )


def test_unicode_is_normalised_to_nfc() -> None:
    assert key(passenger="Jose\u0301") == key(passenger="Jos\u00e9")
    assert key(flight={"cafe\u0301": 1}) == key(flight={"caf\u00e9": 1})  # object keys too


# Each pair is two different Python values (an int and a float) that are the same number: a pair
# of float literals such as 1.5 and 1.50 would be one float, and could never give two keys.
@pytest.mark.parametrize(
    ("one", "other"),
    [(1500, 1.5e3), (2, 2.0), (0, 0.0), (10**20, 1e20), (-3, -3.0), (2**53, 9007199254740992.0)],
)
def test_numbers_that_are_equal_give_one_key(one: float, other: float) -> None:
    assert type(one) is not type(other)
    assert key(seat=one) == key(seat=other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (True, 1),
        (False, 0),
        (None, 0),
        (None, False),
        ("1", 1),
        ("1.5", 1.5),
        (1.5, 1.05),
        ([1, 2], [2, 1]),
        ([1], 1),
        ({}, []),
        ("", None),
        ({"$n": "2"}, 2),
        ({"a": 1}, [["a", 1]]),
    ],
)
def test_values_that_differ_give_different_keys(one: JsonValue, other: JsonValue) -> None:
    assert key(seat=one) != key(seat=other)


def test_nested_objects_are_ordered() -> None:
    assert key(passenger={"name": "Mara", "doc": {"type": "P", "no": "X1"}}) == key(
        passenger={"doc": {"no": "X1", "type": "P"}, "name": "Mara"}
    )


def test_a_missing_key_argument_counts_as_null() -> None:
    assert key(flight="LH400") == key(flight="LH400", passenger=None, seat=None)
    assert key(flight="LH400") != key(flight="LH400", passenger="")


def test_arguments_that_are_not_key_arguments_do_not_matter() -> None:
    assert key(flight="LH400", note="window please") == key(flight="LH400", note="aisle")


def test_key_arguments_and_tool_both_matter() -> None:
    assert key(flight="LH400") != key(flight="LH401")
    assert derive_key("book_flight", {"flight": "LH400"}, ["flight"]) != derive_key(
        "cancel_flight", {"flight": "LH400"}, ["flight"]
    )


def test_the_key_never_contains_argument_text() -> None:
    distinctive = "Zanzibar-Quokka-77"
    derived = key(passenger=distinctive, flight={"nested": distinctive})
    assert distinctive not in derived
    assert "Zanzibar" not in derived
    assert "book_flight" not in derived


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused(bad: float) -> None:
    with pytest.raises(ConfigurationError, match="finite"):
        key(seat=bad)
    with pytest.raises(ConfigurationError, match=r"flight\.inner\[1\]"):
        key(flight={"inner": [1, bad]})


def test_a_tool_without_key_arguments_must_use_a_marker() -> None:
    with pytest.raises(ConfigurationError, match="marker_key"):
        derive_key("send_email", {"to": "a@example.com"}, [])


def test_a_marker_is_per_call_and_carries_no_call_text() -> None:
    assert marker_key("call-1") != marker_key("call-2")
    assert marker_key("call-1") == marker_key("call-1")
    assert marker_key("call-1").startswith(MARKER_PREFIX)
    assert "call-1" not in marker_key("call-1")
    assert not marker_key("call-1").startswith(KEY_PREFIX)

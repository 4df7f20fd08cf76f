"""The nesting limit in the parser: exact at the boundary, never a RecursionError, and no body
that is invalid on its own slips through the wrapper the check parses it in."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.errors import NestingTooDeep, ProtocolError
from ember.protocols.jsonedit import ORJSON_MAX_DEPTH, JsonDoc, _openers, nesting_exceeds


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _chain(depth: int, leaf: bytes = b"1") -> bytes:
    """Alternating arrays and objects, ``depth`` levels deep."""
    out = leaf
    for i in range(depth):
        out = b"[" + out + b"]" if i % 2 else b'{"k":' + out + b"}"
    return out


def test_orjson_depth_limit_is_the_one_the_check_is_built_on() -> None:
    orjson.loads(b"[" * ORJSON_MAX_DEPTH + b"]" * ORJSON_MAX_DEPTH)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(b"[" * (ORJSON_MAX_DEPTH + 1) + b"]" * (ORJSON_MAX_DEPTH + 1))


@pytest.mark.parametrize("limit", [1, 2, 31, 256, 512])
def test_depth_at_the_limit_parses_one_more_is_refused(limit: int) -> None:
    assert JsonDoc(_chain(limit), max_depth=limit).value == json.loads(_chain(limit))
    with pytest.raises(NestingTooDeep):
        JsonDoc(_chain(limit + 1), max_depth=limit)


# Integers within 64 bits: past them orjson's parsed view holds a float (documented in
# ``jsonedit._parse``; the bytes forwarded are the client's), which is not what this checks.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=6),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values, limit=st.integers(min_value=1, max_value=12))
def test_limit_refuses_exactly_the_bodies_deeper_than_it(value: Any, limit: int) -> None:
    raw = json.dumps(value).encode()
    assert nesting_exceeds(value, limit) == (_depth(value) > limit)
    if _depth(value) > limit:
        with pytest.raises(NestingTooDeep):
            JsonDoc(raw, max_depth=limit)
    else:
        assert JsonDoc(raw, max_depth=limit).value == value


@pytest.mark.parametrize(
    "raw", [b"", b"  ", b"]", b"1],[2", b"1,2", b'{"a":1}],[{"b":2}', b"[1]],[[2", b"[[]],[]"]
)
def test_body_that_closes_the_wrapper_itself_is_still_not_json(raw: bytes) -> None:
    with pytest.raises(ProtocolError) as err:
        JsonDoc(raw, max_depth=64)
    assert not isinstance(err.value, NestingTooDeep)
    assert "not valid JSON" in str(err.value)


@pytest.mark.parametrize("limit", [None, 256])
def test_100k_deep_body_is_a_protocol_error_not_a_recursion_error(limit: int | None) -> None:
    with pytest.raises(NestingTooDeep):
        JsonDoc(b"[" * 100_000 + b"]" * 100_000, max_depth=limit)


def test_deep_body_only_json_accepts_is_checked_too() -> None:
    # NaN sends the parse to the stdlib parser: the limit must hold on that path as well
    assert JsonDoc(_chain(8, b"NaN"), max_depth=8).value is not None
    with pytest.raises(NestingTooDeep):
        JsonDoc(_chain(9, b"NaN"), max_depth=8)


def test_wrapped_parse_gives_the_same_value_and_keeps_the_bytes() -> None:
    raw = b' {"a": [1, {"b": "x\\"]]"}], "c": "[[["} \n'
    doc = JsonDoc(raw, max_depth=4)
    assert doc.value == json.loads(raw) and doc.to_bytes() is raw


def test_integers_past_64_bits_are_forwarded_as_sent() -> None:
    """The parsed view may round a huge integer; what goes upstream is the client's bytes."""
    raw = b'{"n": -9223372036854775809, "m": "x"}'
    doc = JsonDoc(raw, max_depth=8)
    assert doc.value["n"] == float(-9223372036854775809)  # the view: rounded to a float
    assert doc.to_bytes() == raw


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=300))
def test_openers_are_counted_as_the_bytes_hold_them(raw: bytes) -> None:
    """The count that lets a shallow body skip the wrapped parse: every ``[`` and ``{``, no
    other byte (a byte counted wrongly would let a deep body past the limit unwrapped)."""
    assert _openers(raw) == raw.count(b"[") + raw.count(b"{")


def test_openers_count_every_byte_value_apart_from_the_two() -> None:
    every = bytes(range(256)) * 3
    assert _openers(every) == 6

"""Byte-exact editing: what ember did not mean to change keeps its bytes."""

from __future__ import annotations

import json
from unittest import mock

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.errors import ProtocolError
from ember.protocols import jsonedit
from ember.protocols.jsonedit import JsonDoc, OverlappingEdit, loads, locate

ODD = (
    b'{ "model" : "m",\n  "system":[ {"type":"text","text":"caf\\u00e9 \xc3\xa9"} ] ,'
    b'"n": 1.50e2, "messages" :[]  }'
)


def test_unedited_document_returns_the_same_object_bytes() -> None:
    doc = JsonDoc(ODD)
    assert doc.to_bytes() is ODD


def test_append_keeps_every_original_byte_and_adds_compact_json() -> None:
    doc = JsonDoc(ODD)
    doc.append(["system"], {"type": "text", "text": "ember"})
    out = doc.to_bytes()
    start = ODD.index(b"] ,")
    assert out[:start] == ODD[:start]
    assert out[start:].startswith(b',{"type":"text","text":"ember"}]')
    assert out.endswith(ODD[start + 1 :])
    assert json.loads(out)["system"][-1]["text"] == "ember"
    assert doc.value["system"][-1]["text"] == "ember"


def test_append_to_empty_array_has_no_leading_comma() -> None:
    doc = JsonDoc(ODD)
    doc.append(["messages"], {"role": "user", "content": "hi"})
    assert json.loads(doc.to_bytes())["messages"] == [{"role": "user", "content": "hi"}]


def test_set_key_adds_new_member_last_and_replaces_existing_in_place() -> None:
    doc = JsonDoc(b'{"a":1,"b":{"x":true}}')
    doc.set_key(["b"], "y", "new")
    doc.set_key([], "a", 2)
    assert doc.to_bytes() == b'{"a":2,"b":{"x":true,"y":"new"}}'


def test_set_key_on_empty_object() -> None:
    doc = JsonDoc(b'{"o": { } }')
    doc.set_key(["o"], "k", [1])
    assert json.loads(doc.to_bytes()) == {"o": {"k": [1]}}


def test_duplicate_keys_edit_the_member_json_loads_keeps() -> None:
    doc = JsonDoc(b'{"a":1,"a":2}')
    doc.replace(["a"], 3)
    assert doc.to_bytes() == b'{"a":1,"a":3}'
    assert json.loads(doc.to_bytes())["a"] == 3


def test_overlapping_edits_are_refused() -> None:
    doc = JsonDoc(b'{"a":{"b":[1]}}')
    doc.replace(["a"], {"b": [9]})
    with pytest.raises(OverlappingEdit):
        doc.append(["a", "b"], 2)


def test_two_appends_to_the_same_array_keep_their_order() -> None:
    doc = JsonDoc(b'{"a":[]}')
    doc.append(["a"], 1)
    doc.append(["a"], 2)
    assert doc.to_bytes() == b'{"a":[1,2]}'


def test_rollback_restores_bytes_and_value() -> None:
    doc = JsonDoc(b'{"a":[1]}')
    mark = doc.checkpoint()
    doc.append(["a"], 2)
    doc.rollback(mark)
    assert doc.to_bytes() == b'{"a":[1]}'
    assert doc.value == {"a": [1]}


@pytest.mark.parametrize("raw", [b"{", b"\xff\xfe", b"", b'{"a":}'])
def test_malformed_bodies_raise_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        JsonDoc(raw)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.text(max_size=6), json_values, max_size=5),
    st.sampled_from([None, 1, 2]),
    st.booleans(),
    json_values,
)
def test_edits_preserve_all_bytes_outside_the_target(
    obj: dict[str, object], indent: int | None, ascii_: bool, new: object
) -> None:
    raw = json.dumps({**obj, "target": [1, {"k": "v"}]}, indent=indent, ensure_ascii=ascii_)
    doc = JsonDoc(raw.encode())
    doc.append(["target"], new)
    out = doc.to_bytes().decode()
    start, end = locate(raw, ["target"])
    # Everything before the array's closing bracket and after it is unchanged.
    close = raw.rindex("]", start, end)
    assert out.startswith(raw[:close])
    assert out.endswith(raw[close:])
    assert json.loads(out)["target"] == [1, {"k": "v"}, new]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"big": NaN}', "nan"),
        (b'{"big": "\\ud800"}', "\ud800"),
    ],
)
def test_inputs_orjson_refuses_still_parse_like_json(raw: bytes, expected: object) -> None:
    value = JsonDoc(raw).value["big"]
    assert (str(value) if expected == "nan" else value) == expected


def test_duplicate_keys_with_odd_spacing_still_resolve_to_the_last() -> None:
    doc = JsonDoc(b'{"a" :\n[1],"b":{"a":0},"a"\t: [2]}')
    doc.append(["a"], 3)
    assert json.loads(doc.to_bytes())["a"] == [2, 3]
    assert doc.to_bytes().startswith(b'{"a" :\n[1],')


def test_escaped_key_spelling_is_found() -> None:
    doc = JsonDoc(b'{"\\u0073ystem":[1],"m":[]}')
    doc.append(["system"], 2)
    assert json.loads(doc.to_bytes()) == {"system": [1, 2], "m": []}


@pytest.mark.parametrize(
    ("raw", "key", "expected"),
    [
        (
            b'{ "a" : 1 ,\n "cache_control": {"type": "ephemeral"},  "b":[ 2 ] }',
            "cache_control",
            b'{ "a" : 1,  "b":[ 2 ] }',
        ),
        (
            b'{"cache_control": {"type": "ephemeral"} , "text": "caf\\u00e9"}',
            "cache_control",
            b'{"text": "caf\\u00e9"}',
        ),
        (
            b'{"text": "x",\n  "cache_control": {"type": "ephemeral"}\n}',
            "cache_control",
            b'{"text": "x"\n}',
        ),
        (b'{ "cache_control": {} }', "cache_control", b"{  }"),
    ],
    ids=["middle", "first", "last", "only"],
)
def test_delete_key_removes_the_member_and_one_comma_and_nothing_else(
    raw: bytes, key: str, expected: bytes
) -> None:
    doc = JsonDoc(raw)
    doc.delete_key([], key)
    assert doc.to_bytes() == expected
    assert key not in doc.value and json.loads(expected) == doc.value


def test_delete_key_inside_a_nested_block_keeps_the_siblings_bytes() -> None:
    raw = b'{"tools": [{"name": "Bash", "cache_control": {"type": "ephemeral"}}, {"name": "R"}]}'
    doc = JsonDoc(raw)
    doc.delete_key(["tools", 0], "cache_control")
    doc.append(["tools"], {"name": "X"})
    assert doc.to_bytes() == b'{"tools": [{"name": "Bash"}, {"name": "R"},{"name":"X"}]}'


def test_delete_key_refuses_a_key_spelled_twice() -> None:
    """Deleting one of two spellings could leave the other in force."""
    doc = JsonDoc(b'{"cache_control": 1, "cache_control": 2}')
    with pytest.raises(ValueError, match="duplicate"):
        doc.delete_key([], "cache_control")


def test_edit_holding_a_lone_surrogate_is_written_escaped_instead_of_failing() -> None:
    """A provider's ``\\ud83d`` escape decodes to a lone surrogate, which UTF-8 cannot hold."""
    doc = JsonDoc(b'{"messages": []}')
    doc.append(["messages"], {"role": "assistant", "content": "half \ud83d"})
    out = doc.to_bytes()
    assert b"\\ud83d" in out and json.loads(out)["messages"][0]["content"] == "half \ud83d"


@settings(max_examples=300, deadline=None)
@given(value=json_values, ascii_only=st.booleans())
def test_loads_reads_what_the_standard_library_reads(value: object, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["NaN", "[Infinity, -Infinity]", '"\\ud800"', '{"a": 1, "a": 2}'])
def test_loads_takes_what_orjson_refuses_as_the_standard_library_does(text: str) -> None:
    """A provider's event with such a value parsed before orjson read events: it still does."""
    got, want = loads(text), json.loads(text)
    assert json.dumps(got) == json.dumps(want)


def test_loads_reads_an_integer_past_64_bits_as_its_float() -> None:
    assert loads(str(2**70)) == float(2**70)


def test_loads_of_broken_json_raises_the_standard_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads('{"type": "message_delta"')


def _paths(value: object, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


_WRITERS = {
    "compact": lambda v: orjson.dumps(v),
    "spaced": lambda v: json.dumps(v).encode(),
    "ascii escapes": lambda v: json.dumps(v, ensure_ascii=True, separators=(",", ":")).encode(),
}


@settings(max_examples=300, deadline=None)
@given(
    value=st.dictionaries(st.text(max_size=3), json_values, min_size=1, max_size=5),
    writer=st.sampled_from(sorted(_WRITERS)),
)
def test_every_value_is_found_where_a_scan_of_the_text_finds_it(
    value: dict[str, object], writer: str
) -> None:
    """Members are skipped by writing their parsed value when the body is compact: whatever
    the writer, each path's span is the one a plain scan of the text gives."""
    raw = _WRITERS[writer](value)
    doc = JsonDoc(raw)
    for path in _paths(doc.value):
        assert doc._locate(path) == locate(doc.text, path), path


def test_a_value_an_edit_changed_is_scanned_not_guessed() -> None:
    raw = b'{"messages":[{"a":1},{"b":[2,3]}],"system":[{"text":"s"}],"x":1}'
    doc = JsonDoc(raw)
    doc.replace(("messages", 0), {"a": 99})
    assert doc._locate(("system",)) == locate(doc.text, ("system",))
    assert doc._locate(("x",)) == locate(doc.text, ("x",))
    assert json.loads(doc.to_bytes())["messages"][0] == {"a": 99}


def test_a_compact_history_before_the_system_prompt_is_not_read_again() -> None:
    """Claude Code writes ``system`` after ``messages``: finding it must not rebuild the
    history as objects (the scan of every message was a sixth of a long session's CPU)."""
    history = [{"role": "user", "content": [{"type": "text", "text": f"m{i}"}]} for i in range(50)]
    raw = orjson.dumps({"model": "m", "messages": history, "system": [{"text": "s"}]})
    doc = JsonDoc(raw)
    scanned: list[int] = []
    real = jsonedit._value_end

    def spy(text: str, pos: int) -> int:
        scanned.append(pos)
        return real(text, pos)

    with mock.patch.object(jsonedit, "_value_end", spy):
        start, end = doc._locate(("system",))
    assert json.loads(doc.text[start:end]) == [{"text": "s"}]
    messages_at = doc.text.index("[")
    assert messages_at not in scanned


@settings(max_examples=300, deadline=None)
@given(
    before=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    after=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    ascii_=st.booleans(),
    new=json_values,
)
def test_edited_bytes_are_the_edited_text_encoded(
    before: dict[str, object], after: dict[str, object], ascii_: bool, new: object
) -> None:
    """The body is spliced from the client's own bytes at byte offsets counted from either
    end of the text: the same bytes as encoding the whole edited text, wherever the edits
    sit and whatever characters come before or after them."""
    value = {**before, "target": [1], "obj": {"k": "é"}, **after}
    raw = json.dumps(value, ensure_ascii=ascii_, separators=(",", ":")).encode()
    doc = JsonDoc(raw)
    doc.append(["target"], new)
    doc.set_key(["obj"], "added", new)
    text, pos, parts = doc.text, 0, []
    for s in sorted(doc._splices, key=lambda s: (s.start, s.end)):
        parts += [text[pos : s.start], s.text]
        pos = s.end
    assert doc.to_bytes() == ("".join(parts) + text[pos:]).encode()
    assert json.loads(doc.to_bytes())["obj"]["added"] == new

"""Parsing import lines: every bad line is named by its number and says how to fix it."""

from __future__ import annotations

import pytest

from ember.memory import MemoryInputError
from ember.memory.importing import parse_line, parse_lines


def test_a_full_line_parses() -> None:
    m = parse_line(
        1,
        '{"content": "Uses uv", "metadata": {"src": "wiki"}, "created_at": "2026-03-01T12:00:00Z",'
        ' "importance": 0.8, "user_id": "u", "session_id": "s", "agent_id": "a"}',
    )
    assert m.content == "Uses uv" and m.importance == 0.8 and dict(m.metadata) == {"src": "wiki"}
    assert m.created_at == 1772366400.0
    assert (m.user_id, m.session_id, m.agent_id) == ("u", "s", "a")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"text": "x"}', "unknown key 'text'"),
        ('{"content": ""}', '"content" is required'),
        ('{"content": 5}', '"content" must be a string'),
        ('{"content": "x", "importance": 2}', "between 0 and 1"),
        ('{"content": "x", "importance": true}', '"importance" must be a number'),
        ('{"content": "x", "metadata": []}', '"metadata" must be a JSON object'),
        ('{"content": "x", "created_at": "yesterday"}', "is not ISO-8601"),
    ],
)
def test_bad_lines_name_their_number_and_problem(line: str, message: str) -> None:
    with pytest.raises(MemoryInputError) as err:
        parse_line(7, line)
    assert str(err.value).startswith("line 7: ") and message in str(err.value)


def test_parse_lines_numbers_every_physical_line_and_skips_blank_ones() -> None:
    lines = [b'{"content": "a"}\n', b"\n", b"oops\n", b'{"content": "b"}']
    out = [(n, getattr(x, "content", None)) for n, x in parse_lines(lines)]
    assert out == [(1, "a"), (3, None), (4, "b")]

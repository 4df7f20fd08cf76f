"""One key set in a JSON-with-comments file: every other byte stays (OpenCode's, Gemini CLI's
and Qwen Code's configuration files hold comments and trailing commas)."""

from __future__ import annotations

import json

import pytest

from ember.clients import jsonc
from ember.errors import ClientError

COMMENTED = """\
{
  // my settings, keep this line
  "theme": "dark", /* and this */
  "provider": {
    "anthropic": {"models": {}}
  },
  "list": [1, 2,],
}
"""


def test_a_new_key_goes_after_the_last_member_in_its_objects_style() -> None:
    out = jsonc.set_key(COMMENTED, ("provider", "openai", "options", "baseURL"), "http://h/v1", "f")
    head = COMMENTED.split('{"models": {}}')[0] + '{"models": {}},\n'
    assert out.startswith(head)  # nothing before it moved; a comma after its new neighbour
    assert '  "list": [1, 2,],\n}\n' in out
    assert jsonc.loads(out, "f")["provider"]["openai"] == {"options": {"baseURL": "http://h/v1"}}
    assert '    "openai": {\n      "options": {' in out  # the file's own two-space step


def test_a_key_inside_a_one_line_object_stays_on_its_line() -> None:
    out = jsonc.set_key(COMMENTED, ("provider", "anthropic", "timeout"), 5, "f")
    assert '    "anthropic": {"models": {}, "timeout": 5}\n' in out


def test_setting_the_same_value_returns_the_same_text_and_a_new_value_replaces_in_place() -> None:
    once = jsonc.set_key(COMMENTED, ("theme",), "dark", "f")
    assert once is COMMENTED or once == COMMENTED
    light = jsonc.set_key(COMMENTED, ("theme",), "light", "f")
    assert light == COMMENTED.replace('"theme": "dark"', '"theme": "light"')


def test_absent_or_empty_text_becomes_a_plain_json_file() -> None:
    for text in (None, "", "  \n"):
        out = jsonc.set_key(text, ("a", "b"), 1, "f")
        assert json.loads(out) == {"a": {"b": 1}}
    assert json.loads(jsonc.set_key("{}", ("a",), 1, "f")) == {"a": 1}
    assert jsonc.set_key('{"a": 1 // note\n}', ("b",), 2, "f") == '{"a": 1, // note\n  "b": 2\n}'


def test_a_value_on_the_way_that_is_not_an_object_is_the_users_to_fix() -> None:
    with pytest.raises(ClientError, match=r"f: provider.anthropic is not an object"):
        jsonc.set_key('{"provider": {"anthropic": "x"}}', ("provider", "anthropic", "k"), 1, "f")


@pytest.mark.parametrize("broken", ['{"a": 1', '{"a" 1}', '{"a": 1} x', "[1]", '{"a": "b\\q"}'])
def test_broken_json_says_where_and_what_to_do(broken: str) -> None:
    with pytest.raises(ClientError, match="fix it"):
        jsonc.set_key(broken, ("a",), 1, "settings.json")

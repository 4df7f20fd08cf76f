"""What TOIN keeps of a call and its output: structure and slice, never a value."""

from __future__ import annotations

import json

import pytest

from ember.learn.toin.keys import PatternKey, auth_mode, family, parse_key
from ember.learn.toin.privacy import (
    call_signature,
    hash_name,
    query_pattern,
    query_patterns,
    structure_of,
)


def test_keys_round_trip_and_unknown_is_explicit() -> None:
    key = PatternKey("oauth", family("claude-sonnet-4-5-20250929"), "0a1b2c")
    assert str(key) == "oauth|claude-sonnet|0a1b2c" and parse_key(str(key)) == key
    assert family(None) == "unknown"
    assert parse_key("abc123") == PatternKey("unknown", "unknown", "abc123")  # legacy bare hash
    for bad in ("a|b", "a||ff", "a|b|not-hex", "a|b|c|d"):
        with pytest.raises(ValueError, match="not a TOIN pattern key"):
            parse_key(bad)


@pytest.mark.parametrize(
    ("headers", "mode"),
    [
        ({"x-api-key": "sk-ant-api03-xyz"}, "api_key"),
        ({"authorization": "Bearer sk-ant-oat01-xyz"}, "oauth"),
        ({"authorization": "Bearer sk-proj-xyz"}, "api_key"),
        ({"authorization": "Bearer eyJhbGciOi.x.y"}, "oauth"),
        ({"authorization": "Basic dXNlcg=="}, "unknown"),
        ({}, "unknown"),
    ],
)
def test_auth_mode_is_told_from_the_kind_of_credential(headers: dict[str, str], mode: str) -> None:
    assert auth_mode(headers) == mode


def test_same_structure_with_other_values_has_the_same_hash() -> None:
    a = structure_of("Read", json.dumps({"path": "/home/alice/secret.txt", "size": 10}))
    b = structure_of("Read", json.dumps({"size": 99, "path": "/etc/passwd"}))
    assert a == b and a.kind == "json-object"
    assert a.fields == tuple(sorted([hash_name("path"), hash_name("size")]))
    assert structure_of("Grep", json.dumps({"path": "x", "size": 1})).hash != a.hash
    assert structure_of("Read", json.dumps({"path": "x", "size": "1"})).hash != a.hash


def test_text_outputs_are_told_apart_by_their_layout() -> None:
    grep = "src/a.py:12:def secret_name():\nsrc/b.py:40:    secret_name()\n"
    numbered = "     1→import os\n     2→print(os.environ)\n"
    diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    kinds = [structure_of("t", text).kind for text in (grep, numbered, diff, "one line", "")]
    assert kinds == ["text:grep", "text:numbered", "text:diff", "text:line", "empty"]
    other_words = "lib/c.rs:7:fn other() {}\nlib/d.rs:9:    other();\n"
    assert structure_of("t", grep).hash == structure_of("t", other_words).hash


def test_arrays_use_their_first_elements_layout() -> None:
    s = structure_of("list", json.dumps([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]))
    assert s.kind == "json-array" and len(s.fields) == 2


def test_query_strings_keep_predicates_only_and_free_text_is_dropped() -> None:
    assert query_pattern('status:open author:"Alice Smith" label:bug') == " ".join(
        f"{hash_name(f)}:*" for f in ("status", "author", "label")
    )
    assert query_pattern("how do I rotate the production database password") is None
    assert query_patterns({"query": "repo:acme/secret is:pr", "limit": 5}) == [
        f"{hash_name('repo')}:* {hash_name('is')}:*"
    ]
    assert query_patterns('{"q": "free text"}') == []
    assert query_patterns({"path": "a:b"}) == []  # not a query argument


def test_a_call_digest_ignores_key_order_and_string_encoding() -> None:
    a = call_signature("Read", {"file_path": "/x", "limit": 50})
    assert a == call_signature("Read", '{"limit": 50, "file_path": "/x"}')
    assert a != call_signature("Read", {"file_path": "/y", "limit": 50})
    assert a != call_signature("Grep", {"file_path": "/x", "limit": 50})

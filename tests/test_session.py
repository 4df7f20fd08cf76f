from __future__ import annotations

import json

from ember.session import derive_session_id


def test_header_wins() -> None:
    assert derive_session_id({"x-ember-session-id": "abc"}, {}, None, None, None) == "abc"


def test_claude_code_metadata_user_id_formats() -> None:
    old = {"metadata": {"user_id": "user_9f8e_account_1234-5678_session_0a1b2c3d-4e5f-6071"}}
    assert derive_session_id({}, old, None, None, None) == "0a1b2c3d-4e5f-6071"
    new = {"metadata": {"user_id": json.dumps({"device_id": "d", "session_id": "sess-42"})}}
    assert derive_session_id({}, new, None, None, None) == "sess-42"


def test_codex_prompt_cache_key() -> None:
    assert derive_session_id({}, {"prompt_cache_key": "conv-1"}, None, None, None) == "conv-1"


def test_digest_is_stable_for_one_conversation_and_differs_across_projects() -> None:
    a1 = derive_session_id({}, {}, "/p", "m", "first ask")
    a2 = derive_session_id({}, {"messages": ["later"]}, "/p", "m", "first ask")
    b = derive_session_id({}, {}, "/q", "m", "first ask")
    assert a1 == a2 != b

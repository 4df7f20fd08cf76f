from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ember.session import SALT_FILE, CredentialTags, derive_session_id


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


# -- the client's credential (a session never spans two API keys) -------------------------------

KEY_A = {"x-api-key": "sk-ant-aaaa"}
KEY_B = {"x-api-key": "sk-ant-bbbb"}


def test_two_keys_with_the_same_first_message_are_two_sessions() -> None:
    tags = CredentialTags()
    a = derive_session_id(KEY_A, {}, "/p", "m", "hi", tags.tag(KEY_A))
    b = derive_session_id(KEY_B, {}, "/p", "m", "hi", tags.tag(KEY_B))
    a_again = derive_session_id(KEY_A, {"messages": [1]}, "/p", "m", "hi", tags.tag(KEY_A))
    assert a != b and a == a_again


def test_no_credential_keeps_the_digest_it_always_had() -> None:
    assert CredentialTags().tag({}) is None
    plain = derive_session_id({}, {}, "/p", "m", "hi")
    assert derive_session_id({}, {}, "/p", "m", "hi", None) == plain
    seed = json.dumps(["/p", "m", "hi"], ensure_ascii=False)
    assert plain == "s-" + hashlib.sha256(seed.encode()).hexdigest()[:24]


def test_bearer_token_x_api_key_and_azure_api_key_are_the_same_credential() -> None:
    tags = CredentialTags()
    forms = [
        {"authorization": "Bearer sk-1"},
        {"authorization": "bearer  sk-1 "},
        {"x-api-key": "sk-1"},
        {"api-key": "sk-1"},
    ]
    assert len({tags.tag(h) for h in forms}) == 1
    assert tags.tag({"authorization": "Bearer sk-2"}) != tags.tag(forms[0])


def test_the_tag_is_salted_per_instance_and_never_shows_the_key() -> None:
    one, two = CredentialTags(), CredentialTags()
    tag = one.tag(KEY_A)
    assert tag is not None and tag != two.tag(KEY_A)
    assert len(tag) == 16 and "aaaa" not in tag
    assert tag != hashlib.sha256(b"sk-ant-aaaa").hexdigest()[:16]  # not a plain digest
    assert "salt" in repr(one) and repr(one) == repr(two)  # the salt is not printed
    session = derive_session_id(KEY_A, {}, "/p", "m", "hi", tag)
    assert "aaaa" not in session and tag not in session


def test_a_named_session_keeps_its_name_whatever_the_key() -> None:
    """Decided in ember.session: a refreshed OAuth token must not split a live session."""
    tags = CredentialTags()
    claude = {"metadata": {"user_id": "user_9f8e_account_1234-5678_session_0a1b2c3d-4e5f-6071"}}
    for key in (KEY_A, KEY_B):
        tag = tags.tag(key)
        assert derive_session_id(key, claude, None, None, "hi", tag) == "0a1b2c3d-4e5f-6071"
        assert derive_session_id(key, {"prompt_cache_key": "c1"}, None, None, "hi", tag) == "c1"
        named = {**key, "x-ember-session-id": "mine"}
        assert derive_session_id(named, {}, None, None, "hi", tag) == "mine"


def test_opencodes_session_header_names_the_session_of_every_request() -> None:
    """OpenCode's title request on Responses has no ``prompt_cache_key``; its turns do: both
    are one session, the one its ``x-session-id`` names."""
    headers = {"x-session-id": "ses_abc"}
    title = derive_session_id(headers, {"input": []}, "/p", "m", "Generate a title")
    turn = derive_session_id(headers, {"prompt_cache_key": "ses_abc"}, "/p", "m", "say hi")
    assert title == turn == "ses_abc"
    assert derive_session_id({"x-session-id": " "}, {}, "/p", "m", "hi").startswith("s-")


def test_the_proxies_of_one_home_tag_a_key_alike_and_keep_the_salt_private(
    tmp_path: Path,
) -> None:
    """A conversation resumed under another proxy of the home (a new `ember wrap`) stays one
    session; another home tags the same key differently."""
    headers = {"x-api-key": "sk-ant-aaaa"}
    first = CredentialTags.for_home(tmp_path)
    again = CredentialTags.for_home(tmp_path)
    assert first.tag(headers) == again.tag(headers) is not None
    salt = tmp_path / SALT_FILE
    assert salt.stat().st_mode & 0o777 == 0o600 and len(salt.read_bytes()) == 32
    assert b"sk-ant-aaaa" not in salt.read_bytes()
    other = tmp_path / "other"
    other.mkdir()
    assert CredentialTags.for_home(other).tag(headers) != first.tag(headers)


def test_a_home_that_cannot_keep_the_salt_still_tags_keys(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    tags = CredentialTags.for_home(blocked / "home")  # below a file: no folder, no salt file
    assert tags.tag({"x-api-key": "k"}) is not None
    (tmp_path / SALT_FILE).write_bytes(b"short")  # damaged: left as it is, not trusted
    assert CredentialTags.for_home(tmp_path).tag({"x-api-key": "k"}) is not None
    assert (tmp_path / SALT_FILE).read_bytes() == b"short"

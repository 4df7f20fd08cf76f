"""Which agent session a request belongs to (pure).

1. ``x-ember-session-id`` header;
2. the client's own session id: Claude Code puts it in ``metadata.user_id`` — either
   ``user_<hash>_account_<uuid>_session_<uuid>`` or, in newer versions, a JSON string with a
   ``session_id`` field; Codex sends ``prompt_cache_key`` (its conversation id) on Responses;
   OpenCode sends its session (``ses_...``) in an ``x-session-id`` header with every request,
   its title request included (which has no ``prompt_cache_key`` on Responses);
3. otherwise a digest of project + model + the first user message + the client's credential:
   every request of one conversation repeats its first user message, so they share a session
   without any header.

The credential takes part as a salted digest (:class:`CredentialTags`), so two clients with
different API keys whose first messages are the same ("hi", a fixed harness prompt) are two
sessions: merged, each saw the other's session-scoped memories and shared one ledger. The salt
is random per ember home, kept in ``$EMBER_HOME/credential-salt`` (readable by the user only)
so that a conversation resumed under another proxy of the home stays its session; the key
itself is never stored, logged or written, and its digest is only ever mixed into the session
digest.

A client that names its session (1. and 2.) keeps that name, whatever its key. Decided so
because: everything else finds a session by that name (``ember stats``, Claude Code's transcript
files are named by it, a user who sets ``x-ember-session-id`` looks it up by what they set);
those names are UUIDs minted per conversation, so two keys share one only when a person made
them so; and subscription logins (Claude Code's OAuth token, Codex's ChatGPT login) refresh
their bearer token within a live session, so keying a named session by the credential would
split one conversation in two at every refresh, which is worse and more common than the merge
it would prevent.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ember.fsutil import private_dirs

#: The header OpenCode names its session in.
CLIENT_SESSION_HEADER = "x-session-id"
_CLAUDE_SESSION = re.compile(r"_session_([0-9a-fA-F-]{8,})")
#: Where clients put the provider credential: Anthropic's ``x-api-key``, OpenAI's (and Claude
#: Code's OAuth) ``authorization: Bearer``, Azure OpenAI's ``api-key``, Google's
#: ``x-goog-api-key``.
CREDENTIAL_HEADERS = ("x-api-key", "authorization", "api-key", "x-goog-api-key")
#: Hex digits of a credential tag: 64 bits, so two keys of one proxy never share a tag.
_TAG_HEX = 16
#: Where an ember home keeps the salt of its credential tags, and its length.
SALT_FILE = "credential-salt"
_SALT_BYTES = 32


class CredentialTags:
    """Salted digests of provider credentials, to tell clients apart without keeping a key.

    The salt is random: per ember home (``for_home``: the proxy's), else per instance. A tag is
    never written anywhere on its own, only mixed into a session digest; checking a guessed
    key against a session id would take the salt file, readable by the user only. A client
    with no credential has no tag.
    """

    def __init__(self, salt: bytes | None = None) -> None:
        self._salt = salt if salt is not None else secrets.token_bytes(32)

    @classmethod
    def for_home(cls, home: Path) -> CredentialTags:
        """Tags that stay the same across the proxies of one ember ``home`` (``SALT_FILE``
        there, made on first use, owner-only).

        A client that names no session (Gemini CLI, Qwen Code) resumes a conversation in a
        new process, often under a new proxy (``ember wrap`` stops its proxy when the client
        exits): with a salt per proxy its resumed requests became another session, the memory
        blocks injected earlier were not replayed, and the provider's cached prefix broke at
        the first of them (Gemini CLI's ``--resume``: 0.02 less cache read). A home that cannot
        keep the file gets a salt of this process only."""
        path = home / SALT_FILE
        try:
            private_dirs(home)  # a proxy may start before anything else made its home
        except OSError:
            return cls()
        for _ in range(2):
            try:
                salt = path.read_bytes()
            except FileNotFoundError:
                salt = b""
            except OSError:
                return cls()
            if len(salt) == _SALT_BYTES:
                return cls(salt)
            if salt:
                return cls()  # a damaged file is left for the user to see
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue  # another proxy made it meanwhile: read that one
            except OSError:
                return cls()
            fresh = secrets.token_bytes(_SALT_BYTES)
            with os.fdopen(fd, "wb") as handle:
                handle.write(fresh)
                handle.flush()
                os.fsync(handle.fileno())
            return cls(fresh)
        return cls()

    def __repr__(self) -> str:
        return "CredentialTags(<salt hidden>)"

    def tag(self, headers: Mapping[str, str]) -> str | None:
        """The tag of the first credential header present (names lower-case), or None."""
        for name in CREDENTIAL_HEADERS:
            key = credential_value(headers.get(name, ""))
            if key:
                digest = hmac.new(self._salt, key.encode("utf-8"), hashlib.sha256)
                return digest.hexdigest()[:_TAG_HEX]
        return None


def credential_value(raw: str) -> str:
    """The credential in a header value: the token of ``Bearer <token>``, else the value."""
    value = raw.strip()
    scheme, _, token = value.partition(" ")
    if scheme.lower() == "bearer":
        return token.strip()
    return value


def _from_metadata(body: Any) -> str | None:
    meta = body.get("metadata") if isinstance(body, dict) else None
    user_id = meta.get("user_id") if isinstance(meta, dict) else None
    if not isinstance(user_id, str) or not user_id:
        return None
    m = _CLAUDE_SESSION.search(user_id)
    if m:
        return m.group(1)
    if user_id.startswith("{"):
        try:
            parsed = json.loads(user_id)
        except json.JSONDecodeError:
            return None
        sid = parsed.get("session_id") if isinstance(parsed, dict) else None
        return sid if isinstance(sid, str) and sid else None
    return None


def derive_session_id(
    headers: Mapping[str, str],
    body: Any,
    project: str | None,
    model: str | None,
    first_user_text: str | None,
    credential_tag: str | None = None,
) -> str:
    """The session id (rules in the module docstring). ``credential_tag`` is the client's
    :meth:`CredentialTags.tag`, never the key: it only changes the derived digest."""
    explicit = headers.get("x-ember-session-id", "").strip()
    if explicit:
        return explicit
    client = _from_metadata(body)
    if client:
        return client
    key = body.get("prompt_cache_key") if isinstance(body, dict) else None
    if isinstance(key, str) and key:
        return key
    named = headers.get(CLIENT_SESSION_HEADER, "").strip()
    if named:
        return named
    parts = [project or "", model or "", first_user_text or ""]
    if credential_tag:  # without a credential the digest is what it always was
        parts.append(credential_tag)
    seed = json.dumps(parts, ensure_ascii=False)
    return "s-" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:24]

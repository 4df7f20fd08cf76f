"""Which agent session a request belongs to (pure).

1. ``x-ember-session-id`` header;
2. the client's own session id: Claude Code puts it in ``metadata.user_id`` — either
   ``user_<hash>_account_<uuid>_session_<uuid>`` or, in newer versions, a JSON string with a
   ``session_id`` field; Codex sends ``prompt_cache_key`` (its conversation id) on Responses;
3. otherwise a digest of project + model + the first user message: every request of one
   conversation repeats its first user message, so they share a session without any header.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

_CLAUDE_SESSION = re.compile(r"_session_([0-9a-fA-F-]{8,})")


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
) -> str:
    explicit = headers.get("x-ember-session-id", "").strip()
    if explicit:
        return explicit
    client = _from_metadata(body)
    if client:
        return client
    key = body.get("prompt_cache_key") if isinstance(body, dict) else None
    if isinstance(key, str) and key:
        return key
    seed = json.dumps([project or "", model or "", first_user_text or ""], ensure_ascii=False)
    return "s-" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:24]

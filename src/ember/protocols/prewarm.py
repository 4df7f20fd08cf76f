"""Requests that only warm the provider's prompt cache and ask for no answer (pure).

Codex opens each Responses WebSocket with a ``response.create`` holding ``generate: false`` and
only its base prompt; Anthropic accepts ``max_tokens: 0`` to pre-write a cache entry. Such a
request is not a turn of the conversation: recorded as one, its short input reads as a history
that restarted (a new generation of the session, and every later message recorded again under
new ids), and it has no answer to fork from.
"""

from __future__ import annotations

from typing import Any


def is_prewarm(protocol: str, body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    if protocol == "openai_responses":
        return body.get("generate") is False
    if protocol == "anthropic":
        return body.get("max_tokens") == 0
    return False

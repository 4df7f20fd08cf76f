"""A plain one-question request in each wire format, for ember's own calls (cold shadow pages,
the steward, the comparison's pairing): a system prompt, one user message, no tools, no stream.
"""

from __future__ import annotations

import orjson

PATHS = {
    "anthropic": "/v1/messages",
    "openai_chat": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
}


def plain_path(protocol: str, model: str) -> str:
    """Where the plain request of ``protocol`` is sent: ``PATHS``, or for Gemini the model's
    own ``:generateContent`` (its path names the model); ``KeyError`` for a protocol ember
    does not speak."""
    if protocol == "gemini":
        return f"/v1beta/models/{model}:generateContent"
    return PATHS[protocol]


def plain_request(protocol: str, model: str, system: str, user: str, max_tokens: int) -> bytes:
    """The body; raises ``KeyError`` for a protocol ember does not speak."""
    if protocol == "anthropic":
        body: dict[str, object] = {
            "model": model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": user}],
        }
    elif protocol == "openai_chat":
        body = {
            "model": model,
            "max_completion_tokens": max_tokens,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
    elif protocol == "openai_responses":
        body = {
            "model": model,
            "max_output_tokens": max_tokens,
            "instructions": system,
            "input": [{"role": "user", "content": user}],
            "store": False,
        }
    elif protocol == "gemini":  # the model is in the path (``plain_path``)
        body = {
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": [{"role": "user", "parts": [{"text": user}]}],
            "generationConfig": {"maxOutputTokens": max_tokens},
        }
    else:
        raise KeyError(protocol)
    return orjson.dumps(body)

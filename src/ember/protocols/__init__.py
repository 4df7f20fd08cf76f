"""Wire formats. The only package that knows what a provider's JSON looks like.

``ADAPTERS`` maps each served endpoint to its adapter, and ``adapter_for_path`` finds the
adapter of a request's path (Gemini's paths hold the model: ``/v1beta/models/{model}:
generateContent``); everything else in ember talks to the ``ProtocolAdapter`` interface.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ember.protocols.anthropic import AnthropicAdapter
from ember.protocols.base import (
    AssembledMessage,
    Block,
    ProtocolAdapter,
    StreamAssembler,
    ToolResult,
    Usage,
)
from ember.protocols.gemini import GeminiAdapter
from ember.protocols.jsonedit import JsonDoc
from ember.protocols.openai_chat import OpenAIChatAdapter
from ember.protocols.openai_responses import OpenAIResponsesAdapter

ANTHROPIC = AnthropicAdapter()
OPENAI_CHAT = OpenAIChatAdapter()
OPENAI_RESPONSES = OpenAIResponsesAdapter()
#: Gemini's adapter bound to no model (``adapter_for_path`` binds one per request)
GEMINI = GeminiAdapter()

#: served path -> adapter (paths as clients send them, after the base URL)
ADAPTERS: dict[str, ProtocolAdapter] = {
    "/v1/messages": ANTHROPIC,
    "/v1/chat/completions": OPENAI_CHAT,
    "/v1/responses": OPENAI_RESPONSES,
}

#: Gemini's generation endpoints: ``/v1beta/models/{model}:generateContent`` (and
#: ``:streamGenerateContent``; the API serves ``/v1/`` too). ``countTokens`` and the rest of
#: Google's paths are passed through (``guess_adapter``).
_GEMINI_PATH = re.compile(
    r"^/(?:v1beta|v1)/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)
#: Every path an exchange is served on, as route patterns (``proxy.routes``: ``{model}`` is one
#: path segment); ``adapter_for_path`` gives a matching path's adapter.
ENDPOINTS: tuple[str, ...] = (
    *ADAPTERS,
    *(
        f"/{version}/models/{{model}}:{method}"
        for version in ("v1beta", "v1")
        for method in ("generateContent", "streamGenerateContent")
    ),
)
#: Paths of Google's API that no other provider serves (``/upload/`` for files).
_GEMINI_PREFIXES = ("/v1beta/", "/v1alpha/", "/upload/")


def adapter_for_path(path: str) -> ProtocolAdapter | None:
    """The adapter that serves ``path`` (a Gemini one bound to the path's model and to
    whether it streams), or None for a path ember only passes through."""
    adapter = ADAPTERS.get(path)
    if adapter is not None:
        return adapter
    m = _GEMINI_PATH.match(path)
    if m is None:
        return None
    return GEMINI.bound(m.group("model"), stream=m.group("method") == "streamGenerateContent")


def guess_adapter(path: str, headers: Mapping[str, str]) -> ProtocolAdapter:
    """The wire format of a request ember passes through (``/v1/models``,
    ``/v1/messages/count_tokens``, Gemini's ``:countTokens``...): where it goes upstream and
    the shape of an error ember answers it with. Google's by its paths and its key header
    (``x-goog-api-key``), Anthropic's by its SDK's headers, else OpenAI's."""
    served = adapter_for_path(path)
    if served is not None:
        return served
    if path.startswith(_GEMINI_PREFIXES) or "x-goog-api-key" in headers:
        return GEMINI
    if "anthropic-version" in headers or "x-api-key" in headers:
        return ANTHROPIC
    return OPENAI_CHAT


#: Every wire format by its name (``ProtocolAdapter.name``); Gemini's unbound.
BY_NAME: dict[str, ProtocolAdapter] = {a.name: a for a in (*ADAPTERS.values(), GEMINI)}
#: The wire format ember speaks to each provider (``ProtocolAdapter.family``) when it calls a
#: model itself: Anthropic's Messages, OpenAI's Chat Completions, Gemini's (unbound).
BY_FAMILY: dict[str, ProtocolAdapter] = {a.family: a for a in (ANTHROPIC, OPENAI_CHAT, GEMINI)}

__all__ = [
    "ADAPTERS",
    "ANTHROPIC",
    "BY_FAMILY",
    "BY_NAME",
    "ENDPOINTS",
    "GEMINI",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "AssembledMessage",
    "Block",
    "JsonDoc",
    "ProtocolAdapter",
    "StreamAssembler",
    "ToolResult",
    "Usage",
    "adapter_for_path",
    "guess_adapter",
]

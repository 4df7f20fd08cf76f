"""Wire formats. The only package that knows what a provider's JSON looks like.

``ADAPTERS`` maps each served endpoint to its adapter; everything else in ember talks to the
``ProtocolAdapter`` interface.
"""

from __future__ import annotations

from ember.protocols.anthropic import AnthropicAdapter
from ember.protocols.base import (
    AssembledMessage,
    Block,
    ProtocolAdapter,
    StreamAssembler,
    ToolResult,
    Usage,
)
from ember.protocols.jsonedit import JsonDoc
from ember.protocols.openai_chat import OpenAIChatAdapter
from ember.protocols.openai_responses import OpenAIResponsesAdapter

ANTHROPIC = AnthropicAdapter()
OPENAI_CHAT = OpenAIChatAdapter()
OPENAI_RESPONSES = OpenAIResponsesAdapter()

#: served path -> adapter (paths as clients send them, after the base URL)
ADAPTERS: dict[str, ProtocolAdapter] = {
    "/v1/messages": ANTHROPIC,
    "/v1/chat/completions": OPENAI_CHAT,
    "/v1/responses": OPENAI_RESPONSES,
}

__all__ = [
    "ADAPTERS",
    "ANTHROPIC",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "AssembledMessage",
    "Block",
    "JsonDoc",
    "ProtocolAdapter",
    "StreamAssembler",
    "ToolResult",
    "Usage",
]

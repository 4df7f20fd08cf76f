"""``ember.testing``: a deterministic provider emulator for tests, demos and benchmarks.

:class:`Emulator` is an ASGI app that speaks the Anthropic Messages, OpenAI Chat Completions
and OpenAI Responses wire protocols well enough for the official SDKs to work against it
unchanged, and that models both providers' prompt caches. Serve it with
``ember.server.BackgroundServer``::

    emu = Emulator()
    emu.script(Reply("hello"), Reply.tool_use("read_file", {"path": "a.py"}))
    with BackgroundServer(emu) as srv:
        client = anthropic.Anthropic(base_url=srv.url, api_key="test")
        ...
    assert emu.requests[-1].json()["model"] == "claude-sonnet-4-5"
"""

from __future__ import annotations

from ember.testing.cache_model import AnthropicCache, AnthropicUsage, OpenAICache
from ember.testing.emulator import Emulator, RecordedRequest
from ember.testing.replies import Reply, ToolCall
from ember.testing.tokens import count_json_tokens, count_tokens

__all__ = [
    "AnthropicCache",
    "AnthropicUsage",
    "Emulator",
    "OpenAICache",
    "RecordedRequest",
    "Reply",
    "ToolCall",
    "count_json_tokens",
    "count_tokens",
]

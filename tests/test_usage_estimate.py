"""The usage ember estimates when a provider reported none (pure)."""

from __future__ import annotations

import base64
from typing import Any

from ember.protocols.base import AssembledMessage, Block
from ember.usage_estimate import MEDIA_TOKENS, answer_tokens, estimate_usage, tokens_of


def answer(*blocks: Block) -> AssembledMessage:
    return AssembledMessage("openai_chat", blocks=list(blocks), complete=True)


def test_about_four_bytes_a_token_rounded_up() -> None:
    assert [tokens_of(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
    assert tokens_of("é" * 4) == 2  # UTF-8 bytes, not characters


def test_output_counts_text_thinking_and_tool_calls() -> None:
    msg = answer(
        Block("thinking", text="x" * 40),
        Block("text", text="y" * 400),
        Block("tool_use", name="read_file", input={"path": "a.py"}),
        Block("tool_use", name="run", input='{"cmd": "make"}'),  # a Chat arguments string
    )
    expected = 10 + 100 + tokens_of("read_file") + tokens_of('{"path":"a.py"}')
    expected += tokens_of("run") + tokens_of('{"cmd": "make"}')
    assert answer_tokens(msg) == expected


def test_input_counts_the_request_as_the_provider_saw_it_as_fresh_input() -> None:
    words = "word " * 1000
    request: Any = {"model": "gpt-5", "messages": [{"role": "user", "content": words}]}
    usage = estimate_usage(request, answer(Block("text", text="ok")))
    assert 1250 <= usage.input_tokens <= 1300  # 5,000 bytes of text, and the keys around it
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.output_tokens) == (0, 0, 1)


def test_an_inline_image_is_a_flat_count_not_its_base64() -> None:
    image = "data:image/png;base64," + base64.b64encode(b"\0" * 300_000).decode()
    part = {"type": "image_url", "image_url": {"url": image}}
    request: Any = {"messages": [{"role": "user", "content": [part]}]}
    usage = estimate_usage(request, answer())
    assert MEDIA_TOKENS <= usage.input_tokens < MEDIA_TOKENS + 50


def test_a_deeply_nested_request_does_not_recurse() -> None:
    value: Any = "leaf"
    for _ in range(5000):
        value = [value]
    assert estimate_usage({"metadata": value}, answer()).input_tokens >= 1

"""Answers for the shadow-fork tests, streamed as each provider streams them.

Each answer is written as SSE bytes and assembled by the adapter's own assembler (fed in small
chunks that split UTF-8 sequences and lines), so the tests replay what ember really records.
Every answer holds what a lossy replay would lose: thinking with a signature, redacted
thinking, reasoning items with their ids and encrypted content, text with U+2028 (a line break
to ``str.splitlines`` but plain text to JSON) and tool calls nobody has answered.
"""

from __future__ import annotations

import json
from typing import Any

from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.protocols.jsonedit import locate
from ember.protocols.sse import SSEParser

QUESTION = "Shadow turn: list the facts of this conversation worth remembering."
TEXT = "Running the tests now.\u2028Then I will patch caf\u00e9.py."


def sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def assemble(adapter: ProtocolAdapter, raw: bytes, chunk: int = 7) -> AssembledMessage:
    parser, assembler = SSEParser(), adapter.assembler()
    pieces = [raw[i : i + chunk] for i in range(0, len(raw), chunk)]
    for piece in pieces:
        for event in parser.feed(piece):
            assembler.feed(event.event, event.data)
    for event in parser.close():
        assembler.feed(event.event, event.data)
    return assembler.result()


def spans(raw: bytes) -> dict[str, bytes]:
    """The raw bytes of each top-level value of a JSON object."""
    text = raw.decode()
    return {k: text[slice(*locate(text, [k]))].encode() for k in json.loads(raw)}


# -- Anthropic ------------------------------------------------------------------------------

THOUGHT = "The user wants the failing test fixed; run it first."
SIGNATURE = "EqQBCkgIARABGAIiQP8s+opaque/signature=="
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlx"
CALL_INPUT = {"command": "pytest -q tests/test_caf\u00e9.py", "timeout": 120}


def block_delta(index: int, delta: dict[str, Any]) -> tuple[str, Any]:
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def block_start(index: int, block: dict[str, Any]) -> tuple[str, Any]:
    return (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def block_stop(index: int) -> tuple[str, Any]:
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def anthropic_answer_sse(stop: bool = True) -> bytes:
    """thinking (signed), redacted thinking, text with U+2028, a Bash call nobody answered."""
    usage = {"input_tokens": 3, "cache_read_input_tokens": 9000, "output_tokens": 1}
    message = {
        "id": "msg_shadow_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "usage": usage,
    }
    arguments = json.dumps(CALL_INPUT, ensure_ascii=False)
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": message}),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(0, {"type": "thinking_delta", "thinking": THOUGHT[:20]}),
        ("ping", {"type": "ping"}),
        block_delta(0, {"type": "thinking_delta", "thinking": THOUGHT[20:]}),
        block_delta(0, {"type": "signature_delta", "signature": SIGNATURE}),
        block_stop(0),
        block_start(1, {"type": "redacted_thinking", "data": REDACTED}),
        block_stop(1),
        block_start(2, {"type": "text", "text": ""}),
        block_delta(2, {"type": "text_delta", "text": TEXT[:23]}),
        block_delta(2, {"type": "text_delta", "text": TEXT[23:]}),
        block_stop(2),
        block_start(3, {"type": "tool_use", "id": "toolu_shadow_1", "name": "Bash", "input": {}}),
        block_delta(3, {"type": "input_json_delta", "partial_json": arguments[:11]}),
        block_delta(3, {"type": "input_json_delta", "partial_json": arguments[11:]}),
        block_stop(3),
    ]
    if stop:
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use"},
                    "usage": {"output_tokens": 80},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    return sse(events)


#: What the fork must append for ``anthropic_answer_sse``, written out by hand.
ANTHROPIC_TURN = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "text", "text": TEXT},
        {"type": "tool_use", "id": "toolu_shadow_1", "name": "Bash", "input": CALL_INPUT},
    ],
}


# -- OpenAI Chat ----------------------------------------------------------------------------

CHAT_ARGUMENTS = '{"path": "caf\u00e9.py",  "line": 12}'  # spacing as generated, kept verbatim


def chat_answer_sse() -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": "chatcmpl-9",
            "object": "chat.completion.chunk",
            "model": "gpt-4.1",
            "choices": [choice],
        }

    call = {
        "index": 0,
        "id": "call_shadow_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": ""},
    }
    events: list[tuple[str | None, Any]] = [
        (None, chunk({"role": "assistant", "content": ""})),
        (None, chunk({"content": TEXT[:10]})),
        (None, chunk({"content": TEXT[10:]})),
        (None, chunk({"tool_calls": [call]})),
        (
            None,
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": CHAT_ARGUMENTS[:9]}}]}),
        ),
        (
            None,
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": CHAT_ARGUMENTS[9:]}}]}),
        ),
        (None, chunk({}, "tool_calls")),
        (None, "[DONE]"),
    ]
    return sse(events)


CHAT_TURN = {
    "role": "assistant",
    "content": TEXT,
    "tool_calls": [
        {
            "id": "call_shadow_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": CHAT_ARGUMENTS},
        }
    ],
}


#: What ``chat_body`` says of its stream by default: a stream that asks for its usage.
STREAM_WITH_USAGE = '"stream": true,\n "stream_options": {"include_usage": true},'


def chat_body(system_words: int = 1200, stream: str = STREAM_WITH_USAGE) -> bytes:
    """A Chat request as a client might write it: spacing, ``\\u`` escapes, a float spelled
    ``0.20`` -- bytes a re-serialising proxy would change. ``stream``: its stream keys, as
    JSON members ending with a comma."""
    system = " ".join(f"rule{i % 50}" for i in range(system_words))
    tool = (
        '{"type": "function", "function": {"name": "read_file", "parameters": '
        '{"type": "object", "properties": {"path": {"type": "string"}}}}}'
    )
    return (
        '{"model": "gpt-4.1",  "messages": [\n'
        f'  {{"role": "system", "content": "{system}"}},\n'
        '  {"role": "user", "content": "Fix the test in caf\\u00e9.py"},\n'
        '  {"role": "assistant", "content": null, "tool_calls": '
        '[{"id": "call_a", "type": "function", '
        '"function": {"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}}]},\n'
        '  {"role": "tool", "tool_call_id": "call_a", "content": "def test(): assert 1 == 2"},\n'
        '  {"role": "user", "content": "Run it again"}\n'
        f'], "tools": [{tool}], "tool_choice": "auto", {stream} "temperature": 0.20,\n'
        ' "metadata": {"team": "core"}, "max_completion_tokens": 4096}'
    ).encode()


# -- OpenAI Responses -----------------------------------------------------------------------

REASONING = {
    "id": "rs_shadow_1",
    "type": "reasoning",
    "summary": [
        {"type": "summary_text", "text": "Run the test."},
        {"type": "summary_text", "text": "Then patch."},
    ],
    "encrypted_content": "gAAAAABpZW5jcnlwdGVkLXJlYXNvbmluZw==",
}
MESSAGE = {
    "id": "msg_shadow_1",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "phase": "commentary",
    "content": [{"type": "output_text", "text": TEXT, "annotations": [], "logprobs": []}],
}
FUNCTION_CALL = {
    "id": "fc_shadow_1",
    "type": "function_call",
    "status": "completed",
    "name": "exec_command",
    "arguments": '{"cmd": "pytest -q"}',
    "call_id": "call_shadow_1",
}
CUSTOM_CALL = {
    "id": "ctc_shadow_1",
    "type": "custom_tool_call",
    "status": "completed",
    "call_id": "call_shadow_2",
    "name": "apply_patch",
    "input": "*** Begin Patch\n*** Update File: caf\u00e9.py\n-a\n+b\n*** End Patch\n",
}
RESPONSES_OUTPUT = [REASONING, MESSAGE, FUNCTION_CALL, CUSTOM_CALL]


def responses_answer_sse(
    output: list[dict[str, Any]] | None = None, final_output: bool = True
) -> bytes:
    """The items streamed one by one, then ``response.completed`` (with the output, or with
    an empty one: then the assembler keeps the items it saw)."""
    items = RESPONSES_OUTPUT if output is None else output
    response = {
        "id": "resp_shadow_1",
        "object": "response",
        "status": "in_progress",
        "model": "gpt-5.1",
        "output": [],
    }
    events: list[tuple[str | None, Any]] = [
        (
            "response.created",
            {"type": "response.created", "sequence_number": 0, "response": response},
        ),
    ]
    for i, item in enumerate(items):
        events.append(
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {**item, "status": "in_progress"},
                },
            )
        )
        if item["type"] == "message":
            events.append(
                (
                    "response.output_text.delta",
                    {"type": "response.output_text.delta", "output_index": i, "delta": TEXT},
                )
            )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": i, "item": item},
            )
        )
    done = {**response, "status": "completed", "output": items if final_output else []}
    done["usage"] = {
        "input_tokens": 5000,
        "input_tokens_details": {"cached_tokens": 4864},
        "output_tokens": 70,
    }
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    for n, (_, data) in enumerate(events):
        data["sequence_number"] = n
    return sse(events)

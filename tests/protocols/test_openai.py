from __future__ import annotations

import json

from ember.protocols import OPENAI_CHAT, OPENAI_RESPONSES, edits
from ember.protocols.jsonedit import JsonDoc
from ember.protocols.sse import iter_events
from tests.client_fixtures import load_scenario

CHAT = {
    "model": "gpt-5",
    "messages": [
        {"role": "developer", "content": "be terse"},
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
    ],
}


def test_chat_reads_system_user_and_tool_results() -> None:
    assert OPENAI_CHAT.system_text(CHAT) == "be terse"
    assert OPENAI_CHAT.latest_user_index(CHAT) == 1
    [r] = OPENAI_CHAT.tool_results(CHAT)
    assert (r.tool_use_id, r.content) == ("c1", "a.py\nb.py")


def test_chat_system_block_goes_to_the_developer_message_and_stays_a_string() -> None:
    doc = JsonDoc(json.dumps(CHAT).encode())
    edits.put_system_block(OPENAI_CHAT, doc, "<t>", "</t>", "<t>tail</t>")
    sent = json.loads(doc.to_bytes())
    assert sent["messages"][0]["content"] == "be terse\n\n<t>tail</t>"
    assert sent["messages"][1:] == CHAT["messages"][1:]


def test_chat_usage_splits_cached_from_fresh_input() -> None:
    u = OPENAI_CHAT.usage(
        {
            "prompt_tokens": 2000,
            "completion_tokens": 50,
            "prompt_tokens_details": {"cached_tokens": 1920},
            "completion_tokens_details": {"reasoning_tokens": 20},
        }
    )
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) == (
        80,
        1920,
        50,
        20,
    )


def _sse(*chunks: object) -> list[bytes]:
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


def test_chat_stream_assembles_text_tool_calls_and_usage() -> None:
    asm = OPENAI_CHAT.assembler()
    chunks = _sse(
        {"id": "c", "model": "gpt-5", "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"content": "Hel"}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"content": "lo"}}]},
        {
            "id": "c",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "ls", "arguments": '{"p'},
                            }
                        ]
                    },
                }
            ],
        },
        {
            "id": "c",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '":1}'}}]},
                }
            ],
        },
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"id": "c", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3}},
    )
    for ev in iter_events(chunks):
        asm.feed(ev.event, ev.data)
    msg = asm.result()
    assert msg.complete and msg.text == "Hello" and msg.stop_reason == "tool_calls"
    assert [(t.id, t.name, t.input) for t in msg.tool_calls] == [("call_1", "ls", {"p": 1})]
    assert msg.usage is not None and msg.usage.output_tokens == 3


RESPONSES = {
    "model": "gpt-5-codex",
    "instructions": "You are Codex.",
    "input": [
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "<environment_context>\n  <cwd>/work/repo</cwd>\n"
                    "</environment_context>",
                }
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "run tests"}],
        },
        {"type": "function_call", "call_id": "k1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "k1", "output": "ok"},
    ],
}


def test_responses_reads_instructions_user_and_outputs() -> None:
    assert OPENAI_RESPONSES.system_text(RESPONSES) == "You are Codex."
    assert OPENAI_RESPONSES.latest_user_index(RESPONSES) == 1
    assert OPENAI_RESPONSES.user_text(RESPONSES, 1) == "run tests"
    [r] = OPENAI_RESPONSES.tool_results(RESPONSES)
    assert (r.tool_use_id, r.content) == ("k1", "ok")


def test_responses_string_input_becomes_one_user_item_on_edit() -> None:
    doc = JsonDoc(b'{"model":"gpt-5","input":"hi"}')
    edits.append_user_tail(OPENAI_RESPONSES, doc, 0, "mem")
    assert json.loads(doc.to_bytes())["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "hi"},
                {"type": "input_text", "text": "mem"},
            ],
        }
    ]


def test_responses_system_block_appends_to_instructions() -> None:
    doc = JsonDoc(json.dumps(RESPONSES).encode())
    edits.put_system_block(OPENAI_RESPONSES, doc, "<t>", "</t>", "tail")
    assert json.loads(doc.to_bytes())["instructions"] == "You are Codex.\n\ntail"


def test_responses_stream_takes_the_completed_response() -> None:
    final = {
        "id": "r1",
        "object": "response",
        "model": "gpt-5",
        "status": "completed",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "done"}]}],
        "usage": {
            "input_tokens": 1500,
            "input_tokens_details": {"cached_tokens": 1408},
            "output_tokens": 2,
        },
    }
    chunks = [
        f"event: {t}\ndata: {json.dumps(d)}\n\n".encode()
        for t, d in [
            ("response.created", {"type": "response.created", "response": {"id": "r1"}}),
            ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "do"}),
            ("response.completed", {"type": "response.completed", "response": final}),
        ]
    ]
    asm = OPENAI_RESPONSES.assembler()
    for ev in iter_events(chunks):
        asm.feed(ev.event, ev.data)
    msg = asm.result()
    assert msg.text == "done" and msg.complete
    assert msg.usage is not None
    assert (msg.usage.input_tokens, msg.usage.cache_read_tokens) == (92, 1408)


def test_leading_user_texts_count_user_messages_past_any_number_of_developer_items() -> None:
    """Codex 0.171.0 with its default model opens with five developer items (the first one
    holding its tools, with no content) before the user's ``<environment_context>``: counting
    items of every role put the working directory out of reach of project resolution."""

    def item(role: str, text: str) -> dict[str, object]:
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    tools = {"type": "additional_tools", "role": "developer", "tools": []}
    env = item("user", "<environment_context><cwd>/p</cwd></environment_context>")
    developer = [item("developer", f"d{i}") for i in range(4)]
    rest = [item("assistant", "hi"), item("user", "ask"), item("user", "later")]
    body = {"input": [tools, *developer, env, *rest]}
    assert OPENAI_RESPONSES.leading_user_texts(body, 2) == [
        "<environment_context><cwd>/p</cwd></environment_context>",
        "ask",
    ]
    assert OPENAI_RESPONSES.leading_user_texts({"input": "hello"}, 3) == ["hello"]
    assert OPENAI_CHAT.leading_user_texts(CHAT, 3) == ["list files"]


def test_codex_tools_sent_in_an_input_item_count_as_offered_tools() -> None:
    """Codex with its default model sends its tools in an ``additional_tools`` input item
    (recorded from the real CLI); without reading them its main thread offered "no tools"
    and a side request could not be told apart from it."""
    [first, *_] = [r for r in load_scenario("codex", "default-model-exec-then-resume")]
    body = first.json()
    assert "tools" not in body
    assert OPENAI_RESPONSES.has_tools(body)
    assert "exec" in OPENAI_RESPONSES.tool_names(body)
    assert not OPENAI_RESPONSES.has_tools({"input": [{"role": "user", "content": "hi"}]})


def test_a_chat_ask_followed_by_a_system_reminder_is_still_the_turn_the_model_answers() -> None:
    """aider sends its edit-format rules as a system message after the user's ask: the ask
    is the latest turn (memory treats it as new), the reminder is not a turn of its own."""
    body = {
        "messages": [
            {"role": "system", "content": "Act as an expert software developer."},
            {"role": "user", "content": "Where do we deploy?"},
            {"role": "system", "content": "# *SEARCH/REPLACE block* Rules:"},
        ]
    }
    assert OPENAI_CHAT.turn_end(body) == 2
    assert OPENAI_CHAT.latest_user_index(body) == 1
    assert OPENAI_CHAT.turn_end({"messages": [{"role": "user", "content": "hi"}]}) == 1


def test_qwen_codes_context_message_is_not_the_users_first_words() -> None:
    """Qwen Code's first user message is its context (the date, the directory tree): as the
    first words it made every session begun in a directory on one day one session."""
    from ember.protocols import ANTHROPIC

    for scenario, adapter in (
        ("prompt-then-continue", OPENAI_CHAT),
        ("anthropic-prompt", ANTHROPIC),
    ):
        for req in load_scenario("qwen-code", scenario):
            if req.kind == "main":
                assert adapter.first_user_text(req.json()) == (
                    "Please read notes.txt and tell me what it says. run: `cat notes.txt`"
                ), req.name
    only_context = {
        "messages": [
            {
                "role": "user",
                "content": "This is the Qwen Code. We are "
                "setting up the context for our chat.\nToday's date is ...",
            }
        ]
    }
    assert OPENAI_CHAT.first_user_text(only_context) == only_context["messages"][0]["content"]

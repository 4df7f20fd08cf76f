"""What ember's features do to a Gemini conversation through ``protocols``: tool calls and
outputs, transcript items, shadow forks, owned tools and the stream splice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ember.protocols import GEMINI, edits
from ember.protocols.assemble import assemble
from ember.protocols.calls import tool_calls
from ember.protocols.forking import ForkRefused, fork_eligibility, fork_request
from ember.protocols.jsonedit import JsonDoc
from ember.protocols.outputs import live_outputs, opens_conversation, outputs_in
from ember.protocols.replay import PLACEHOLDER
from ember.protocols.splice import splice_for
from ember.protocols.sse import RawEvents
from ember.protocols.tooling import TOOLING, ToolOutcome, ToolSpec
from ember.protocols.transcript_items import answer_items, transcript_items

LOG = "line\n" * 50


def _conversation() -> dict[str, Any]:
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "<session_context>cwd</session_context>"}]},
            {"role": "user", "parts": [{"text": "run the tests"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "run_shell_command", "args": {"command": "pytest"}}},
                    {"functionCall": {"name": "read_file", "args": {"path": "a.py"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "run_shell_command-1-x",
                            "name": "run_shell_command",
                            "response": {"output": LOG},
                        }
                    },
                    {
                        "functionResponse": {
                            "id": "read_file-1-y",
                            "name": "read_file",
                            "response": {"error": "no such file"},
                        }
                    },
                ],
            },
        ]
    }


def test_calls_and_live_outputs_are_tied_by_name_when_the_call_had_no_id() -> None:
    body = _conversation()
    calls = tool_calls(GEMINI, body)
    assert set(calls) == {"run_shell_command#0", "read_file#0"}
    run, read = live_outputs(GEMINI, body)
    assert (run.tool, run.arguments, run.text, run.is_error) == (
        "run_shell_command",
        {"command": "pytest"},
        LOG,
        False,
    )
    assert run.path == ("contents", 3, "parts", 0, "functionResponse", "response", "output")
    assert (read.tool, read.text, read.is_error) == ("read_file", "no such file", True)
    # the same output read alone, as compression replays it later, has the same key
    assert [o.call_id for o in outputs_in(GEMINI, body, 3)] == [run.call_id, read.call_id]


def test_a_call_with_an_id_is_answered_by_that_id() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"id": "c9", "name": "ls", "args": {}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"id": "c9", "name": "ls", "response": {}}}],
            },
        ]
    }
    [out] = live_outputs(GEMINI, body)
    assert (out.call_id, out.tool, out.text) == ("c9", "ls", None)  # an object is not text


def test_a_shortened_output_replaces_only_its_string() -> None:
    body = _conversation()
    raw = json.dumps(body).encode()
    doc = JsonDoc(raw)
    run = live_outputs(GEMINI, body)[0]
    edits.replace_tool_output(doc, run, "[shortened]")
    sent = json.loads(doc.to_bytes())
    response = sent["contents"][3]["parts"][0]["functionResponse"]
    assert response == {
        "id": "run_shell_command-1-x",
        "name": "run_shell_command",
        "response": {"output": "[shortened]"},
    }
    assert sent["contents"][:3] == body["contents"][:3]


def test_opens_conversation_until_the_model_has_spoken() -> None:
    assert opens_conversation(GEMINI, {"contents": [{"role": "user", "parts": [{"text": "a"}]}]})
    assert not opens_conversation(GEMINI, _conversation())


def test_transcript_drops_the_session_context_and_keeps_who_said_what() -> None:
    items = transcript_items(GEMINI, _conversation())
    assert [(i.position, i.part, i.kind) for i in items] == [
        (1, 0, "user"),
        (2, 0, "assistant"),
        (3, 0, "tool_result"),
        (3, 1, "tool_error"),
    ]
    assert items[1].text.startswith("called run_shell_command(")
    assert items[2].call_ids == items[1].call_ids[:1] and items[2].tool_name == "run_shell_command"
    # read from a later position, the items there are the same (the first content: none)
    assert transcript_items(GEMINI, _conversation(), from_position=3) == items[2:]


def test_answer_items_are_what_the_resent_history_will_say() -> None:
    answer = GEMINI.parse_response(
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Done."}]}}]}
    )
    body = _conversation()
    body["contents"].append({"role": "model", "parts": [{"text": "Done."}]})
    [item] = answer_items(GEMINI, answer, 4)
    assert item == transcript_items(GEMINI, body)[-1]


# -- shadow forks -------------------------------------------------------------------------------


def _finished() -> dict[str, Any]:
    body = _conversation()
    body["contents"].append({"role": "user", "parts": [{"text": "thanks"}]})
    return body


def test_a_fork_appends_the_answer_placeholders_and_the_question_and_nothing_else() -> None:
    sent = json.dumps(_finished()).encode()
    answer = GEMINI.parse_response(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {"text": "Let me check."},
                            {"functionCall": {"name": "ls", "args": {}}, "thoughtSignature": "S"},
                        ],
                    },
                    "finishReason": "STOP",
                }
            ]
        }
    )
    forked = fork_request(GEMINI, sent, answer, "What did the user state?")
    assert forked.startswith(sent[: sent.rindex(b"]")])  # the recorded prefix, byte for byte
    contents = json.loads(forked)["contents"]
    assert contents[-2] == {
        "role": "model",
        "parts": [
            {"text": "Let me check."},
            {"functionCall": {"name": "ls", "args": {}}, "thoughtSignature": "S"},
        ],
    }
    assert contents[-1] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "ls", "response": {"output": PLACEHOLDER}}},
            {"text": "What did the user state?"},
        ],
    }


def test_a_fork_is_refused_after_a_prefill_or_with_calls_forced() -> None:
    prefill = _finished()
    prefill["contents"].append({"role": "model", "parts": [{"text": "Sure"}]})
    assert "prefill" in (fork_eligibility(GEMINI, prefill) or "")
    forced = {**_finished(), "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}
    assert "forces a tool call" in (fork_eligibility(GEMINI, forced) or "")
    assert fork_eligibility(GEMINI, _finished()) is None
    empty = GEMINI.parse_response({"candidates": [{"finishReason": "STOP"}]})
    with pytest.raises(ForkRefused, match="neither text nor function calls"):
        fork_request(GEMINI, json.dumps(_finished()).encode(), empty, "q")


# -- tools ember runs itself ----------------------------------------------------------------------

SPEC = ToolSpec("memory_search", "Search memory.", {"type": "object", "properties": {}})


def test_owned_tools_are_declared_after_the_clients_in_a_tool_of_their_own() -> None:
    body = {"contents": [], "tools": [{"functionDeclarations": [{"name": "ls"}]}]}
    doc = JsonDoc(json.dumps(body).encode())
    ops = TOOLING["gemini"]
    ops.add_definitions(doc, [SPEC])
    tools = json.loads(doc.to_bytes())["tools"]
    assert tools[0] == {"functionDeclarations": [{"name": "ls"}]}
    assert tools[1]["functionDeclarations"][0]["name"] == "memory_search"
    assert "parametersJsonSchema" in tools[1]["functionDeclarations"][0]
    assert ops.tool_names(json.loads(doc.to_bytes())) == {"ls", "memory_search"}
    assert GEMINI.tool_names(json.loads(doc.to_bytes())) == ("ls", "memory_search")


def test_a_continuation_answers_embers_calls_and_drops_the_clients() -> None:
    doc = JsonDoc(json.dumps({"contents": [{"role": "user", "parts": [{"text": "q"}]}]}).encode())
    answer = GEMINI.parse_response(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {"functionCall": {"name": "memory_search", "args": {"q": "x"}}},
                            {"functionCall": {"name": "ls", "args": {}}},
                        ],
                    }
                }
            ]
        }
    )
    owned_call = answer.tool_calls[0]
    TOOLING["gemini"].continue_with(
        doc, answer, {"memory_search"}, [ToolOutcome(owned_call, "found it")]
    )
    contents = json.loads(doc.to_bytes())["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [{"functionCall": {"name": "memory_search", "args": {"q": "x"}}}],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "memory_search", "response": {"output": "found it"}}}
        ],
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, {"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}),
        (
            {"toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}},
            {"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}},
        ),
        (
            {"tool_config": {"retrieval_config": {}}},
            {"tool_config": {"retrieval_config": {}, "functionCallingConfig": {"mode": "NONE"}}},
        ),
    ],
)
def test_the_last_round_forbids_calls(body: dict[str, Any], expected: dict[str, Any]) -> None:
    doc = JsonDoc(json.dumps(body).encode())
    TOOLING["gemini"].forbid_tools(doc)
    assert json.loads(doc.to_bytes()) == expected


def _events(*chunks: Any) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks)


def test_the_splice_holds_back_an_owned_call_but_lets_its_text_out() -> None:
    splice = splice_for("gemini", {"memory_search"})
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hm. "}]}}]}
    calling = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Searching."},
                        {"functionCall": {"name": "memory_search", "args": {}}},
                    ],
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 5},
    }
    out = b""
    events = RawEvents()
    for raw, ev in events.feed(_events(first, calling)):
        out += splice.event(ev.event, ev.data, raw) or b""
    assert splice.tripped
    seen = assemble(GEMINI, [out], streamed=True)
    assert seen is not None and seen.text == "Hm. Searching." and not seen.tool_calls
    assert not seen.complete and seen.usage is None  # the client waits for the continuation
    splice.next_round()
    more = {"candidates": [{"content": {"parts": [{"text": " Found."}]}, "finishReason": "STOP"}]}
    for raw, ev in RawEvents().feed(_events(more)):
        out += splice.event(ev.event, ev.data, raw) or b""
    whole = assemble(GEMINI, [out], streamed=True)
    assert whole is not None and whole.text == "Hm. Searching. Found." and whole.complete


def test_the_splice_passes_the_clients_own_calls() -> None:
    splice = splice_for("gemini", {"memory_search"})
    chunk = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "ls"}}]}}]}
    [(raw, ev)] = RawEvents().feed(_events(chunk))
    assert splice.event(ev.event, ev.data, raw) == raw + b"\n\n" and not splice.tripped

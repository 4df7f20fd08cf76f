"""Gemini's wire format read and edited through the adapter, as every feature uses it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ember.protocols import (
    ANTHROPIC,
    GEMINI,
    OPENAI_CHAT,
    adapter_for_path,
    edits,
    guess_adapter,
)
from ember.protocols.assemble import assemble
from ember.protocols.jsonedit import JsonDoc

SESSION_CONTEXT = (
    "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
    "- **Workspace Directories:**\n  - /work/proj\n- **Directory Structure:**\n"
    "</session_context>"
)

BODY: dict[str, Any] = {
    "contents": [
        {"role": "user", "parts": [{"text": SESSION_CONTEXT}]},
        {"role": "user", "parts": [{"text": "list the files"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Looking."},
                {"functionCall": {"name": "ls", "args": {"path": "."}}, "thoughtSignature": "s1"},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "ls-1700000000-abc",
                        "name": "ls",
                        "response": {"output": "a.py\nb.py"},
                    }
                }
            ],
        },
    ],
    "systemInstruction": {"role": "user", "parts": [{"text": "You are a coding agent."}]},
    "tools": [{"functionDeclarations": [{"name": "ls", "parametersJsonSchema": {}}]}],
    "generationConfig": {"temperature": 0, "thinkingConfig": {"thinkingLevel": "high"}},
}


def _doc(body: Any) -> JsonDoc:
    return JsonDoc(json.dumps(body).encode())


# -- routing ----------------------------------------------------------------------------------


def test_the_path_names_the_model_and_whether_the_answer_streams() -> None:
    json_mode = adapter_for_path("/v1beta/models/gemini-2.5-pro:generateContent")
    stream = adapter_for_path("/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    assert json_mode is not None and stream is not None
    assert (json_mode.name, json_mode.model({}), json_mode.is_stream({})) == (
        "gemini",
        "gemini-2.5-pro",
        False,
    )
    assert (stream.model(BODY), stream.is_stream(BODY)) == ("gemini-2.5-flash", True)


@pytest.mark.parametrize(
    "path",
    [
        "/v1beta/models/gemini-2.5-pro:countTokens",
        "/v1beta/models",
        "/v1beta/models/gemini-2.5-pro:generateContent/extra",
        "/upload/v1beta/files",
    ],
)
def test_other_google_paths_are_not_served_but_passed_to_google(path: str) -> None:
    assert adapter_for_path(path) is None
    assert guess_adapter(path, {}).name == "gemini"


def test_pass_through_guesses_keep_their_providers() -> None:
    assert guess_adapter("/v1/models", {"x-goog-api-key": "k"}).name == "gemini"
    assert guess_adapter("/v1/messages/count_tokens", {"anthropic-version": "x"}) is ANTHROPIC
    assert guess_adapter("/v1/models", {"authorization": "Bearer k"}) is OPENAI_CHAT
    assert adapter_for_path("/v1/messages") is ANTHROPIC


def test_an_unbound_adapter_reads_the_model_from_the_body() -> None:
    assert GEMINI.model({"model": "models/gemini-2.5-flash"}) == "gemini-2.5-flash"
    assert GEMINI.model({}) is None


# -- reading a request ------------------------------------------------------------------------


def test_reads_system_asks_and_function_responses() -> None:
    assert GEMINI.system_text(BODY) == "You are a coding agent."
    assert GEMINI.message_count(BODY) == 4
    assert GEMINI.first_user_text(BODY) == "list the files"  # the context is not the ask
    assert GEMINI.leading_user_texts(BODY, 3) == [SESSION_CONTEXT, "list the files", ""]
    assert GEMINI.latest_user_index(BODY) == 1  # responses alone continue the model's turn
    assert GEMINI.user_text(BODY, 1) == "list the files"
    [result] = GEMINI.tool_results(BODY)
    # Gemini CLI gives the call no id of its own: the response is tied to it by name
    assert (result.tool_use_id, result.content, result.is_error) == ("ls#0", "a.py\nb.py", False)
    assert GEMINI.recent_context(BODY, 4) == (["a.py\nb.py"], ["Looking."])


def test_turn_parts_say_what_the_user_side_sent_by_structure() -> None:
    assert GEMINI.turn_parts(BODY) == ("tool_result",)
    failed = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "run", "args": {}}}]},
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "run", "response": {"error": "exit 1"}}},
                    {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
                    {"fileData": {"mimeType": "application/pdf", "fileUri": "f"}},
                ],
            },
        ]
    }
    assert GEMINI.turn_parts(failed) == ("tool_error", "image", "document")
    ends_with_model = {"contents": [*failed["contents"][:2]]}
    assert GEMINI.turn_parts(ends_with_model) == ()


def test_tools_structured_output_and_effort_fields() -> None:
    assert GEMINI.has_tools(BODY)
    body = {**BODY, "tools": [*BODY["tools"], {"googleSearch": {}}]}
    assert GEMINI.tool_names(body) == ("googleSearch", "ls")
    assert not GEMINI.wants_structured_output(BODY)
    router = {**BODY, "generationConfig": {"responseMimeType": "application/json"}}
    assert GEMINI.wants_structured_output(router)
    schema = {"generation_config": {"response_json_schema": {"type": "object"}}}
    assert GEMINI.wants_structured_output(schema)
    assert GEMINI.effort_fields(BODY).effort == "high"
    # read, never written: nothing says the implicit cache survives a changed thinking level
    assert GEMINI.param_paths(BODY).effort is None
    doc = _doc(BODY)
    assert not edits.set_effort(GEMINI, doc, "low") and not doc.edited


# -- the edits ember makes ----------------------------------------------------------------------


def test_memory_goes_in_a_new_text_part_at_the_end_of_the_ask() -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "fix the bug"}]}]}
    raw = json.dumps(body).encode()
    doc = JsonDoc(raw)
    edits.append_user_tail(GEMINI, doc, 0, "<ember-memory>uses uv</ember-memory>")
    sent = doc.to_bytes()
    parts = json.loads(sent)["contents"][0]["parts"]
    assert parts == [{"text": "fix the bug"}, {"text": "<ember-memory>uses uv</ember-memory>"}]
    assert sent.startswith(raw[: raw.index(b"]}]}")])  # the client's part keeps its bytes


def test_the_system_block_is_one_more_part_of_the_system_instruction() -> None:
    doc = _doc(BODY)
    assert edits.put_system_block(GEMINI, doc, "<t>", "</t>", "<t>terse</t>")
    sent = json.loads(doc.to_bytes())
    assert sent["systemInstruction"]["parts"] == [
        {"text": "You are a coding agent."},
        {"text": "<t>terse</t>"},
    ]
    assert sent["contents"] == BODY["contents"]
    assert edits.owned_system_block(GEMINI, sent, "<t>", "</t>") == "<t>terse</t>"
    again = JsonDoc(doc.to_bytes())  # shaping a shaped body changes nothing
    edits.put_system_block(GEMINI, again, "<t>", "</t>", "<t>terse</t>")
    assert again.to_bytes() == doc.to_bytes()


def test_no_system_instruction_means_no_system_block() -> None:
    body = {"contents": BODY["contents"]}
    doc = _doc(body)
    assert not edits.put_system_block(GEMINI, doc, "<t>", "</t>", "<t>x</t>")
    assert not doc.edited


def test_snake_case_system_instruction_is_edited_where_it_is() -> None:
    body = {"system_instruction": {"parts": [{"text": "sys"}]}, "contents": []}
    doc = _doc(body)
    edits.put_system_block(GEMINI, doc, "<t>", "</t>", "<t>x</t>")
    sent = json.loads(doc.to_bytes())
    assert sent["system_instruction"]["parts"][-1] == {"text": "<t>x</t>"}
    assert "systemInstruction" not in sent


# -- the answer ---------------------------------------------------------------------------------


def test_usage_splits_the_implicit_cache_read_out_of_the_prompt() -> None:
    u = GEMINI.usage(
        {
            "promptTokenCount": 5000,
            "cachedContentTokenCount": 4096,
            "candidatesTokenCount": 40,
            "thoughtsTokenCount": 100,
            "totalTokenCount": 5140,
        }
    )
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens) == (904, 4096, 0)
    assert (u.output_tokens, u.reasoning_tokens) == (140, 100)
    assert u.total_input_tokens == 5000


ANSWER = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Reading it."},
                    {"functionCall": {"name": "read", "args": {"p": "a"}}, "thoughtSignature": "S"},
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
    "modelVersion": "gemini-2.5-flash",
    "responseId": "r1",
}


def test_a_json_answer_is_parsed_with_its_parts_verbatim() -> None:
    msg = GEMINI.parse_response(ANSWER)
    assert (msg.id, msg.model, msg.stop_reason, msg.complete) == (
        "r1",
        "gemini-2.5-flash",
        "stop",
        True,
    )
    assert msg.text == "Reading it."
    [call] = msg.tool_calls
    assert (call.name, call.input, call.id) == ("read", {"p": "a"}, None)
    assert call.raw is not None and call.raw["thoughtSignature"] == "S"
    assert msg.usage is not None and msg.usage.input_tokens == 10


def _sse(*chunks: Any) -> list[bytes]:
    return [f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks]


def _chunk(parts: list[Any], **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if "finishReason" in extra:
        candidate["finishReason"] = extra.pop("finishReason")
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-pro", **extra}


def test_a_stream_joins_text_pieces_and_keeps_the_signature_on_its_part() -> None:
    chunks = _sse(
        _chunk([{"text": "thinking a", "thought": True}]),
        _chunk([{"text": "bout it", "thought": True}]),
        _chunk([{"text": "Hel"}]),
        _chunk([{"text": "lo"}]),
        _chunk([{"text": "", "thoughtSignature": "SIG"}]),
        _chunk(
            [],
            finishReason="STOP",
            usageMetadata={"promptTokenCount": 7, "candidatesTokenCount": 3},
        ),
    )
    msg = assemble(GEMINI.bound("gemini-2.5-pro", stream=True), chunks, streamed=True)
    assert msg is not None and msg.complete and msg.stop_reason == "stop"
    assert [(b.type, b.text, b.signature) for b in msg.blocks] == [
        ("thinking", "thinking about it", None),
        ("text", "Hello", "SIG"),
    ]
    assert msg.usage is not None and (msg.usage.input_tokens, msg.usage.output_tokens) == (7, 3)


def test_a_cut_stream_is_incomplete_and_an_error_event_is_the_answers_error() -> None:
    cut = assemble(GEMINI, _sse(_chunk([{"text": "Hel"}])), streamed=True)
    assert cut is not None and not cut.complete and cut.text == "Hel"
    error = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    failed = assemble(GEMINI, _sse(_chunk([{"text": "a"}]), error), streamed=True)
    assert failed is not None and failed.error is not None
    assert (failed.error.type, failed.error.status) == ("UNAVAILABLE", 503)


def test_a_blocked_prompt_is_a_complete_answer_without_text() -> None:
    msg = GEMINI.parse_response({"promptFeedback": {"blockReason": "SAFETY"}})
    assert msg.complete and msg.stop_reason == "safety" and not msg.blocks


def test_a_json_array_stream_reads_as_the_stream_it_is() -> None:
    body = [_chunk([{"text": "a"}]), _chunk([{"text": "b"}], finishReason="STOP")]
    msg = GEMINI.parse_response(body)
    assert msg.text == "ab" and msg.complete


def test_errors_are_in_googles_shape() -> None:
    body = json.loads(GEMINI.error_body(429, "ember: over the spend limit"))
    assert body == {
        "error": {
            "code": 429,
            "message": "ember: over the spend limit",
            "status": "RESOURCE_EXHAUSTED",
        }
    }
    assert json.loads(GEMINI.error_body(502, "x"))["error"]["status"] == "UNAVAILABLE"
    msg = GEMINI.parse_response({"error": {"code": 400, "message": "bad", "status": "X"}})
    assert msg.error is not None and (msg.error.type, msg.error.status) == ("X", 400)

"""An assembled answer written back as the next turn of its conversation, per wire format.

A shadow fork (``forking``) continues a recorded request with the answer the provider gave
it, placeholder results for the tool calls nobody ran, and a question. This module builds
those values; it never touches the recorded request.

Invariants:
- The answer goes back as the provider produced it: Anthropic thinking blocks with their
  ``signature`` and redacted thinking with its ``data`` unchanged (a modified thinking block
  is refused with a 400), Chat tool calls with their arguments string as generated, Responses
  output items verbatim (``Block.raw``), in order, including reasoning items and item types
  ember does not model (a reasoning item without the item that followed it is refused).
- Every tool call of the answer gets a result in the protocol's own shape, or the provider
  refuses the request (a ``tool_use`` must be followed by its ``tool_result``; a Chat
  ``tool_calls`` entry by a ``tool`` message; a Responses call by its ``*_output`` item).
  The placeholder says plainly that no result exists, so the model never takes it for a
  tool-verified fact.
"""

from __future__ import annotations

from typing import Any, Protocol

from ember.protocols.base import AssembledMessage, Block
from ember.protocols.jsonedit import dumps

#: The result given to a tool call the original thread has not seen answered yet.
PLACEHOLDER = (
    "Shadow branch: the original thread's tool call is still pending; this branch did not run "
    "it, so there is no result and nothing here is evidence."
)

Message = dict[str, Any]


class Replay(Protocol):
    def refusal(self, body: dict[str, Any], answer: AssembledMessage) -> str | None:
        """Why this answer cannot be written back (None: it can)."""
        ...

    def turn(self, answer: AssembledMessage) -> list[Message]:
        """The answer as the messages (or input items) that continue the conversation."""
        ...

    def tail(self, answer: AssembledMessage, question: str) -> list[Message]:
        """Placeholder results for the answer's tool calls, then ``question`` from the user."""
        ...


# -- Anthropic ----------------------------------------------------------------------------


def _anthropic_part(b: Block) -> dict[str, Any]:
    if b.type == "thinking":
        return {"type": "thinking", "thinking": b.text, "signature": b.signature}
    if b.type == "redacted_thinking":
        return {"type": "redacted_thinking", "data": b.data}
    if b.type == "tool_use":
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
    if b.type == "text":
        cited = b.raw.get("citations") if b.raw is not None else None
        return {"type": "text", "text": b.text, **({"citations": cited} if cited else {})}
    part = dict(b.raw or {})
    if "input" in part and b.input is not None:  # a streamed server_tool_use: input from deltas
        part["input"] = b.input
    return part


def _anthropic_blocks(answer: AssembledMessage) -> list[Block]:
    """The blocks to replay: all but empty text blocks, which the API refuses with a 400
    ("text content blocks must be non-empty") and which carry nothing."""
    return [b for b in answer.blocks if not (b.type == "text" and not b.text)]


def _anthropic_block_refusal(b: Block) -> str | None:
    if b.type == "thinking" and not b.signature:
        return "a thinking block has no signature (the API refuses it unsigned)"
    if b.type == "redacted_thinking" and not b.data:
        return "a redacted thinking block has no data"
    if b.type == "tool_use" and (not b.id or not isinstance(b.input, dict)):
        return "a tool call has no id or its input is not a JSON object (cut off?)"
    if b.type not in ("text", "thinking", "redacted_thinking", "tool_use") and b.raw is None:
        return f"a {b.type} block was not received whole"
    return None


class AnthropicReplay:
    def refusal(self, body: dict[str, Any], answer: AssembledMessage) -> str | None:
        """``pause_turn`` is refused: the provider expects a paused server-tool turn to be
        sent back for it to continue, and a user message after it is not that."""
        if answer.stop_reason == "pause_turn":
            return "the answer paused mid server-tool turn (stop_reason pause_turn)"
        blocks = _anthropic_blocks(answer)
        if not blocks:
            return "the answer has no content to replay (an empty assistant turn is refused)"
        for b in blocks:
            reason = _anthropic_block_refusal(b)
            if reason:
                return reason
        return None

    def turn(self, answer: AssembledMessage) -> list[Message]:
        content = [_anthropic_part(b) for b in _anthropic_blocks(answer)]
        return [{"role": "assistant", "content": content}]

    def tail(self, answer: AssembledMessage, question: str) -> list[Message]:
        """One user message: the tool results first, then the question. The API wants every
        ``tool_result`` of a turn at the start of the very next user message."""
        results: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": b.id, "content": PLACEHOLDER}
            for b in answer.blocks
            if b.type == "tool_use"
        ]
        return [{"role": "user", "content": [*results, {"type": "text", "text": question}]}]


# -- OpenAI Chat Completions --------------------------------------------------------------


def _chat_call(b: Block) -> dict[str, Any]:
    """The call as streamed or returned (its arguments string unparsed); rebuilt only for an
    answer assembled without it."""
    if b.raw is not None:
        return b.raw
    args = b.input if isinstance(b.input, str) else dumps(b.input if b.input is not None else {})
    return {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": args}}


class ChatReplay:
    def refusal(self, body: dict[str, Any], answer: AssembledMessage) -> str | None:
        if not answer.text and not answer.tool_calls:
            return "the answer has neither text nor tool calls"
        if any(not b.id for b in answer.tool_calls):
            return "a tool call has no id"
        return None

    def turn(self, answer: AssembledMessage) -> list[Message]:
        """Text and calls in one assistant message; ``tool_calls`` left out when there are
        none (an empty list is refused as too short)."""
        message: Message = {"role": "assistant", "content": answer.text or None}
        if answer.tool_calls:
            message["tool_calls"] = [_chat_call(b) for b in answer.tool_calls]
        return [message]

    def tail(self, answer: AssembledMessage, question: str) -> list[Message]:
        results: list[Message] = [
            {"role": "tool", "tool_call_id": b.id, "content": PLACEHOLDER}
            for b in answer.tool_calls
        ]
        return [*results, {"role": "user", "content": question}]


# -- OpenAI Responses ---------------------------------------------------------------------

#: Call items whose result ember can stand in for with text, and the result item's type.
_OUTPUT_TYPES = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}

#: Items the client must answer with something other than text (a screenshot, an approval,
#: a shell outcome list): no placeholder can stand in for their result.
_UNANSWERABLE = ("computer_call", "local_shell_call", "shell_call", "apply_patch_call")
_UNANSWERABLE_ALSO = ("mcp_approval_request",)


def _item_type(b: Block) -> str:
    kind = b.raw.get("type") if b.raw is not None else None
    if isinstance(kind, str):
        return kind
    return {"text": "message", "tool_use": "function_call", "thinking": "reasoning"}.get(
        b.type, b.type
    )


def _responses_item(b: Block) -> Message:
    if b.raw is not None:
        return b.raw
    if b.type == "text":
        return {"type": "message", "role": "assistant", "content": [_output_text(b.text)]}
    args = b.input if isinstance(b.input, str) else dumps(b.input if b.input is not None else {})
    return {"type": "function_call", "call_id": b.id, "name": b.name, "arguments": args}


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text}


def _responses_block_refusal(b: Block, store_off: bool) -> str | None:
    kind = _item_type(b)
    if kind in _UNANSWERABLE or kind in _UNANSWERABLE_ALSO:
        return f"the answer holds a {kind} item, whose result cannot be stood in for with text"
    if b.raw is None and b.type not in ("text", "tool_use"):
        return f"a {kind} item was not received whole"
    if kind == "reasoning" and store_off and not (b.raw or {}).get("encrypted_content"):
        return (
            "a reasoning item has no encrypted_content and the request set store: false "
            "(the API cannot find the item: 404)"
        )
    if kind in _OUTPUT_TYPES and not b.id:
        return "a tool call has no call_id"
    return None


class ResponsesReplay:
    def refusal(self, body: dict[str, Any], answer: AssembledMessage) -> str | None:
        if not answer.blocks:
            return "the answer has no output items"
        store_off = body.get("store") is False
        for b in answer.blocks:
            reason = _responses_block_refusal(b, store_off)
            if reason:
                return reason
        return None

    def turn(self, answer: AssembledMessage) -> list[Message]:
        return [_responses_item(b) for b in answer.blocks]

    def tail(self, answer: AssembledMessage, question: str) -> list[Message]:
        results: list[Message] = [
            {"type": _OUTPUT_TYPES[_item_type(b)], "call_id": b.id, "output": PLACEHOLDER}
            for b in answer.blocks
            if _item_type(b) in _OUTPUT_TYPES
        ]
        text = [{"type": "input_text", "text": question}]
        question_item = {"type": "message", "role": "user", "content": text}
        return [*results, question_item]


# -- Gemini -------------------------------------------------------------------------------


def _gemini_parts(answer: AssembledMessage) -> list[dict[str, Any]]:
    """The answer's parts as the API gave them (``thoughtSignature`` and all), without parts
    that carry nothing: empty unsigned text, and thinking without a signature (a summary of
    the model's thoughts, which is no part of the turn the API expects back)."""
    out: list[dict[str, Any]] = []
    for b in answer.blocks:
        unsigned = b.type in ("text", "thinking") and not b.signature
        if unsigned and (b.type == "thinking" or not b.text):
            continue
        out.append(b.raw if b.raw is not None else _gemini_part(b))
    return out


def _gemini_part(b: Block) -> dict[str, Any]:
    if b.type == "tool_use":
        call: dict[str, Any] = {"name": b.name, "args": b.input if b.input is not None else {}}
        if b.id:
            call["id"] = b.id
        return {"functionCall": call}
    return {"text": b.text}


class GeminiReplay:
    def refusal(self, body: dict[str, Any], answer: AssembledMessage) -> str | None:
        if not answer.text and not answer.tool_calls:
            return "the answer has neither text nor function calls"
        if any(not b.name for b in answer.tool_calls):
            return "a function call has no name"
        return None

    def turn(self, answer: AssembledMessage) -> list[Message]:
        return [{"role": "model", "parts": _gemini_parts(answer)}]

    def tail(self, answer: AssembledMessage, question: str) -> list[Message]:
        """One user content: a response to each function call (by name, and by its ``id``
        when it had one), then the question."""
        results: list[dict[str, Any]] = []
        for b in answer.tool_calls:
            response: dict[str, Any] = {"name": b.name, "response": {"output": PLACEHOLDER}}
            if b.id:
                response["id"] = b.id
            results.append({"functionResponse": response})
        return [{"role": "user", "parts": [*results, {"text": question}]}]


REPLAYS: dict[str, Replay] = {
    "anthropic": AnthropicReplay(),
    "openai_chat": ChatReplay(),
    "openai_responses": ResponsesReplay(),
    "gemini": GeminiReplay(),
}

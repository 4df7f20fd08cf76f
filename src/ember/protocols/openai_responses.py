"""OpenAI Responses (``POST /v1/responses``).

Request: ``instructions`` (the system prompt) and ``input`` (a string, or a list of items:
role messages, ``function_call``, ``function_call_output``, ``reasoning``...). Streams are typed
events with a ``sequence_number``; ``response.completed`` carries the whole final response.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

from ember.protocols.base import (
    AnswerError,
    AssembledMessage,
    Block,
    EffortFields,
    ParamPaths,
    PartKind,
    TextSlot,
    ToolResult,
    Usage,
    not_an_object,
    part_kinds,
)
from ember.protocols.content import as_str, structured_error, text_of
from ember.protocols.jsonedit import loads
from ember.protocols.openai_chat import OpenAIAdapterBase, openai_answer_error, openai_usage

_TEXT_PARTS = ("input_text", "output_text", "text")
_SYSTEM_ROLES = ("system", "developer")
_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
_PART_KINDS: dict[str, PartKind] = {
    "input_text": "text",
    "text": "text",
    "input_image": "image",
    "input_file": "document",
}


def _items(body: Any) -> list[Any]:
    items = body.get("input") if isinstance(body, dict) else None
    return items if isinstance(items, list) else []


def _is_role(item: Any, roles: tuple[str, ...]) -> bool:
    return (
        isinstance(item, dict)
        and item.get("role") in roles
        and item.get("type", "message") == "message"
    )


class OpenAIResponsesAdapter(OpenAIAdapterBase):
    name: ClassVar[str] = "openai_responses"

    def has_tools(self, body: Any) -> bool:
        return super().has_tools(body) or bool(_input_tool_names(body))

    def tool_names(self, body: Any) -> tuple[str, ...]:
        """The ``tools`` field's, and those Codex (with its default model) sends in an
        ``additional_tools`` input item instead: without them its conversations read as
        offering no tools, and a side request could not be told from the main thread."""
        return tuple(sorted((*super().tool_names(body), *_input_tool_names(body))))

    def system_text(self, body: Any) -> str:
        if not isinstance(body, dict):
            return ""
        parts = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
        parts += [
            text_of(i.get("content"), _TEXT_PARTS)
            for i in _items(body)
            if _is_role(i, _SYSTEM_ROLES)
        ]
        return "\n".join(parts)

    def message_count(self, body: Any) -> int:
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return 1
        return len(_items(body))

    def latest_user_index(self, body: Any) -> int | None:
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return 0
        items = _items(body)
        for i in range(len(items) - 1, -1, -1):
            if _is_role(items[i], ("user",)):
                return i
        return None

    def user_text(self, body: Any, index: int) -> str:
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return str(body["input"]) if index == 0 else ""
        items = _items(body)
        item = items[index] if 0 <= index < len(items) else None
        return text_of(item.get("content"), _TEXT_PARTS) if isinstance(item, dict) else ""

    def first_user_text(self, body: Any) -> str | None:
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return str(body["input"])
        for i in _items(body):
            if _is_role(i, ("user",)):
                return text_of(i.get("content"), _TEXT_PARTS)
        return None

    def leading_user_texts(self, body: Any, count: int) -> list[str]:
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return [str(body["input"])][:count]
        users = (i for i in _items(body) if _is_role(i, ("user",)))
        return [
            text_of(i.get("content"), _TEXT_PARTS)
            for _, i in zip(range(count), users, strict=False)
        ]

    def tool_results(self, body: Any) -> list[ToolResult]:
        """The ``function_call_output`` items at the end of the input."""
        out: list[ToolResult] = []
        for item in reversed(_items(body)):
            if not isinstance(item, dict) or item.get("type") != "function_call_output":
                break
            output = item.get("output")
            text = output if isinstance(output, str) else text_of(output, _TEXT_PARTS)
            out.append(ToolResult(item.get("call_id"), text))
        return out[::-1]

    def recent_context(self, body: Any, before: int) -> tuple[list[str], list[str]]:
        tools: list[str] = []
        turns: list[str] = []
        for item in _items(body)[:before]:
            if _is_role(item, ("assistant",)):
                turns.append(text_of(item.get("content"), _TEXT_PARTS))
            elif isinstance(item, dict) and item.get("type") == "function_call_output":
                output = item.get("output")
                tools.append(output if isinstance(output, str) else text_of(output, _TEXT_PARTS))
        return tools, turns

    def user_slot(self, body: Any, index: int) -> TextSlot:
        """An input that is one string is a user message of its own once parts are added."""
        if isinstance(body.get("input"), str):
            return TextSlot(("input",), body["input"], "input_text", message_role="user")
        content = body["input"][index].get("content")
        return TextSlot(("input", index, "content"), content, "input_text")

    def usage(self, raw: Any) -> Usage:
        return openai_usage(raw, "input_tokens", "output_tokens", "input_tokens_details")

    def parse_response(self, body: Any) -> AssembledMessage:
        msg = AssembledMessage(protocol=self.name, complete=True)
        if not isinstance(body, dict):
            msg.error = not_an_object()
            return msg
        if body.get("error"):
            msg.error = openai_answer_error(body["error"])
            if body.get("object") != "response":
                return msg
        elif body.get("status") == "failed":
            msg.error = AnswerError("server_error", "response failed", 500)
        msg.id, msg.model = as_str(body.get("id")), as_str(body.get("model"))
        msg.stop_reason = body.get("status")
        msg.usage = self.usage(body.get("usage")) if body.get("usage") else None
        for item in body.get("output") or []:
            block = _block_from_item(item)
            if block is not None:
                msg.blocks.append(block)
        return msg

    def assembler(self) -> ResponsesAssembler:
        return ResponsesAssembler()

    # -- output shaping ----------------------------------------------------------------------

    def turn_parts(self, body: Any) -> tuple[PartKind, ...]:
        """The trailing tool-output items (``function_call_output``, ``custom_tool_call_output``
        and the other ``*_call_output`` types; an error only by structured fields, as Responses
        has no ``is_error``), or the parts of a final user message, else ``()``."""
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return ("text",)
        items = _items(body)
        last = items[-1] if items else None
        if _is_output(last):
            return _output_parts(items)
        if not _is_role(last, ("user",)):
            return ()
        assert isinstance(last, dict)
        return part_kinds(last.get("content"), _PART_KINDS)

    def effort_fields(self, body: Any) -> EffortFields:
        if not isinstance(body, dict):
            return EffortFields()
        reasoning, text = body.get("reasoning"), body.get("text")
        effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
        verbosity = text.get("verbosity") if isinstance(text, dict) else None
        return EffortFields(
            effort=effort if isinstance(effort, str) else None,
            verbosity=verbosity if isinstance(verbosity, str) else None,
            verbosity_creatable=text is None or isinstance(text, dict),
        )

    def param_paths(self, body: Any) -> ParamPaths:
        """``reasoning.effort`` only when the client sent it; ``text.verbosity``, creating
        ``text`` when absent (its other keys, ``format``, keep their bytes), never when
        ``text`` is something else."""
        fields = self.effort_fields(body)
        return ParamPaths(
            effort=("reasoning", "effort") if fields.effort is not None else None,
            verbosity=("text", "verbosity") if fields.verbosity_creatable else None,
        )

    def system_slot(self, body: Any, *, inherits_system: bool = True) -> TextSlot | None:
        """The tail of the system prompt, wherever the client keeps it: the end of
        ``instructions`` (after a blank line); else, when the input opens with
        system/developer items (Codex sends its prompt that way and no instructions), one
        more text part of the last of them; else a new ``instructions``. Creating
        ``instructions`` in front of a client's developer items put ember's rules *before*
        the client's own prompt. Instructions of another shape are left alone.

        A continuation (``previous_response_id``) gets the block in its own ``instructions``
        only (they are not carried over, so a client resends them every time) and nowhere else:
        the response it continues carries its input, ember's block in the developer items
        included. Codex over WebSocket prewarms with its base prompt (which gets the block) and
        then continues with new items that open with another developer item: a block there
        too was a second copy in the model's prompt, and a new ``instructions`` a second copy
        in front of the cached prefix. With its default model Codex prewarms with an empty input
        (the block then goes in the prewarm's own ``instructions``, not carried over) and sends
        its whole prompt with the turn: that continuation (``inherits_system`` False) gets the
        block in its leading developer messages, like a first request."""
        instructions = ("instructions",)
        current = body.get("instructions")
        if isinstance(current, str) and current:
            return TextSlot(instructions, current, joins=True)
        if body.get("previous_response_id") and inherits_system:
            return None
        if current is None:
            items = _items(body)
            head = _leading_system(items)
            parts = items[head].get("content") if head is not None else None
            if head is not None and isinstance(parts, list):
                return TextSlot(("input", head, "content"), parts, "input_text")
            return TextSlot(instructions, None, joins=True)
        return TextSlot(instructions, current, joins=True) if isinstance(current, str) else None

    def system_texts(self, body: Any) -> list[str]:
        """``instructions``, then the parts of the leading system/developer item."""
        texts: list[str] = []
        if isinstance(body, dict) and isinstance(body.get("instructions"), str):
            texts.append(body["instructions"])
        head = _leading_system(_items(body)) if isinstance(body, dict) else None
        if head is not None:
            content = _items(body)[head].get("content")
            texts += [
                p["text"]
                for p in (content if isinstance(content, list) else [])
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
        return texts


def opens_with_system(body: Any) -> bool:
    """The input opens with a system/developer message (a continuation inherits it)."""
    return isinstance(body, dict) and _leading_system(_items(body)) is not None


def _leading_system(items: list[Any]) -> int | None:
    """The last system/developer message of the run the input opens with. Other items of that
    role belong to the run but hold no text: Codex 0.171.0 with its default model opens with its
    tools as ``{"type": "additional_tools", "role": "developer"}``, and stopping there put ember's
    block in a new ``instructions``, before the client's own prompt."""
    head = None
    for i, item in enumerate(items):
        if not (isinstance(item, dict) and item.get("role") in _SYSTEM_ROLES):
            break
        if _is_role(item, _SYSTEM_ROLES):
            head = i
    return head


def _is_output(item: Any) -> bool:
    kind = item.get("type") if isinstance(item, dict) else None
    return isinstance(kind, str) and kind.endswith("_call_output")


def _output_parts(items: list[Any]) -> tuple[PartKind, ...]:
    parts: list[PartKind] = []
    for item in reversed(items):
        if not _is_output(item):
            break
        output = item.get("output")
        if isinstance(output, list):
            output = text_of(output, _TEXT_PARTS)
        parts.append("tool_error" if structured_error(output) else "tool_result")
    return tuple(reversed(parts))


def _block_from_item(item: Any) -> Block | None:
    """An output item as a :class:`Block` with the item itself as ``raw``.

    Every item is kept, in order: a reasoning item replayed without the item that followed it
    is refused with a 400, and one rebuilt from its summary loses its ``id`` and parts. A
    ``custom_tool_call`` (Codex's ``apply_patch``) is a tool call like a ``function_call``; its
    ``input`` is free text. Items ember does not model keep their own ``type``.
    """
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind == "message":
        return Block("text", text=text_of(item.get("content"), _TEXT_PARTS), raw=item)
    if kind == "function_call":
        raw = item.get("arguments", "")
        try:
            args: Any = json.loads(raw) if raw else {}
        except (json.JSONDecodeError, TypeError):
            args = raw
        name = item.get("name")
        return Block("tool_use", id=item.get("call_id"), name=name, input=args, raw=item)
    if kind == "custom_tool_call":
        name = item.get("name")
        return Block(
            "tool_use", id=item.get("call_id"), name=name, input=item.get("input"), raw=item
        )
    if kind == "reasoning":
        summary = text_of(item.get("summary"), ("summary_text",))
        return Block("thinking", text=summary, signature=item.get("encrypted_content"), raw=item)
    return Block(str(kind), raw=item)


class ResponsesAssembler:
    """Takes the final response from the terminal event (``response.completed``, or
    ``response.incomplete`` / ``response.failed``, which carry the response as it stopped);
    when the stream ends before one, what was streamed so far (text deltas, finished items,
    reasoning with its encrypted content) is kept and the answer is not complete.

    Failures are ``response.failed`` (its ``response.error``) and the ``error`` event (its
    ``code`` / ``message``; over WebSocket also its ``status``). ``response.incomplete`` is no
    failure: it is how the API stops at ``max_output_tokens``, as Anthropic's ``max_tokens``
    stop reason or Chat's ``length``.
    """

    def __init__(self) -> None:
        self.msg = AssembledMessage(protocol=OpenAIResponsesAdapter.name)
        self._text: list[str] = []
        self._items: list[Block] = []
        self._final: AssembledMessage | None = None

    def feed(self, event: str | None, data: str) -> None:
        try:
            p = loads(data)
        except json.JSONDecodeError:
            return
        if not isinstance(p, dict):
            return
        kind = p.get("type", event)
        if kind in _FINAL_EVENTS:
            self._on_final(kind, p.get("response"))
        elif kind == "response.created" and isinstance(p.get("response"), dict):
            response = p["response"]
            self.msg.id, self.msg.model = as_str(response.get("id")), as_str(response.get("model"))
        elif kind == "response.output_text.delta":
            self._text.append(str(p.get("delta", "")))
        elif kind == "response.output_item.done":
            block = _block_from_item(p.get("item"))
            if block is not None:
                self._items.append(block)
        elif kind == "error":
            inner = p.get("error")
            error = openai_answer_error(inner if isinstance(inner, dict) else p)
            status = p.get("status")  # over WebSocket: the HTTP status the request would have had
            if isinstance(status, int) and not isinstance(status, bool) and 400 <= status < 600:
                error = dataclasses.replace(error, status=status)
            self.msg.error = error

    def _on_final(self, kind: str, response: Any) -> None:
        self.msg.complete = True
        if isinstance(response, dict):
            self._final = OpenAIResponsesAdapter().parse_response(response)
        if kind == "response.failed" and (self._final is None or self._final.error is None):
            self.msg.error = self.msg.error or AnswerError("server_error", "response failed", 500)

    def _streamed(self) -> list[Block]:
        return self._items or ([Block("text", text="".join(self._text))] if self._text else [])

    def result(self) -> AssembledMessage:
        final = self._final
        if final is not None:
            final.error = final.error or self.msg.error
            # a failed or incomplete response may come without its output: keep what streamed
            final.blocks = final.blocks or self._streamed()
            return final
        self.msg.blocks = self._streamed()
        return self.msg


def _input_tool_names(body: Any) -> list[str]:
    """Names of the tools in ``additional_tools`` input items, namespaces flattened."""
    names: list[str] = []
    pending: list[Any] = []
    for item in _items(body):
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools = item.get("tools")
            pending.extend(tools if isinstance(tools, list) else [])
    while pending:
        tool = pending.pop()
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            pending.extend(tool["tools"])
        elif isinstance(tool.get("name") or tool.get("type"), str):
            names.append(str(tool.get("name") or tool.get("type")))
    return names

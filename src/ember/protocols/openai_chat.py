"""OpenAI Chat Completions (``POST /v1/chat/completions``).

The system prompt lives inside ``messages`` (role ``system`` or ``developer``); tool results are
messages of role ``tool``. Streams are ``data:`` chunks ending with ``data: [DONE]``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ember.protocols.base import (
    TTL_1_HOUR,
    TTL_24_HOURS,
    AdapterBase,
    AnswerError,
    AssembledMessage,
    Block,
    EffortFields,
    ParamPaths,
    PartKind,
    ProviderBases,
    TextSlot,
    ToolResult,
    Usage,
    not_an_object,
    part_kinds,
    with_query,
)
from ember.protocols.content import as_int, as_str, first_words, structured_error, text_of
from ember.protocols.jsonedit import JsonDoc, dumps, loads

_TEXT_PARTS = ("text", "input_text")
_SYSTEM_ROLES = ("system", "developer")
_TOOL_ROLES = ("tool", "function")
_PART_KINDS: dict[str, PartKind] = {"text": "text", "image_url": "image", "file": "document"}

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    502: "upstream_error",
    504: "timeout_error",
}


def openai_error_body(status: int, message: str) -> bytes:
    """The error shape both OpenAI APIs use; the SDKs read ``error.message``."""
    kind = _ERROR_TYPES.get(status, "api_error")
    return dumps(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}
    ).encode()


#: The HTTP status OpenAI (and servers speaking its protocol) give an error code or type when
#: they can still choose one; an error inside a 200 stream is counted with the same status.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "rate_limit_exceeded": 429,
    "rate_limit_error": 429,
    "insufficient_quota": 429,
    "server_error": 500,
    "api_error": 500,
    "server_is_overloaded": 503,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def _status_of(value: Any) -> int | None:
    """The status an error ``code`` or ``type`` names: a 4xx/5xx number (some compatible servers
    put the HTTP status in ``code``), a known name, or 400 for an ``invalid_*`` code."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 400 <= value <= 599 else None
    if not isinstance(value, str):
        return None
    return _ERROR_STATUS.get(value) or (400 if value.startswith("invalid_") else None)


def openai_answer_error(raw: Any) -> AnswerError:
    """An OpenAI error object (``{"message", "type", "code", "param"}``, or a bare string some
    servers send) as an :class:`AnswerError`. The ``code`` is more specific than the ``type``
    (``rate_limit_exceeded`` vs ``requests``), so it names the error and picks the status when
    it can; anything unrecognised is a 500, the API's ``server_error``."""
    if isinstance(raw, str):
        return AnswerError("server_error", raw, 500)
    error = raw if isinstance(raw, dict) else {}
    code, kind, message = error.get("code"), error.get("type"), error.get("message")
    names = [v for v in (code, kind) if isinstance(v, str) and v and not v.isdigit()]
    status = _status_of(code) or _status_of(kind) or 500
    text = message if isinstance(message, str) else ""
    return AnswerError(names[0] if names else "server_error", text, status)


def openai_usage(raw: Any, prompt_key: str, completion_key: str, details_key: str) -> Usage:
    """Split OpenAI's ``prompt``/``input`` count into fresh and cached input.

    OpenAI counts cached tokens inside the prompt total; without the split a cached prompt
    would be priced twice (once as input, once as cache read).
    """
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get(details_key)
    cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    out_details = raw.get(completion_key + "_details")
    reasoning = as_int(out_details.get("reasoning_tokens")) if isinstance(out_details, dict) else 0
    prompt = as_int(raw.get(prompt_key))
    return Usage(
        input_tokens=max(prompt - cached, 0),
        cache_read_tokens=cached,
        output_tokens=as_int(raw.get(completion_key)),
        reasoning_tokens=reasoning,
    )


def ask_for_usage(doc: JsonDoc) -> None:
    """Make a streaming Chat request end with its usage (``stream_options.include_usage``).

    Without the option the API streams no usage at all: a call ember makes on its own behalf
    from a client's request (a shadow fork of the SDK's default ``stream=True`` request) was
    recorded with 0 tokens and no cost, though its model has a price. The option is no part
    of the prompt (the cache reads the same prefix); it adds one chunk holding the usage and
    ``"usage": null`` to the others, which only ember reads here. A request that is not a
    stream (its body always holds usage) or already asks is left as it is; other keys of
    ``stream_options`` keep their bytes.
    """
    body = doc.value
    if not isinstance(body, dict) or body.get("stream") is not True:
        return
    options = body.get("stream_options")
    if isinstance(options, dict):
        if options.get("include_usage") is not True:
            doc.set_key(["stream_options"], "include_usage", True)
    else:  # absent, null or not an object: the API takes only an object here
        doc.set_key([], "stream_options", {"include_usage": True})


def _messages(body: Any) -> list[Any]:
    msgs = body.get("messages") if isinstance(body, dict) else None
    return msgs if isinstance(msgs, list) else []


class OpenAIAdapterBase(AdapterBase):
    """What both OpenAI wire formats share: the provider, the error shape and the cache
    lifetime."""

    family: ClassVar[str] = "openai"
    #: ``reasoning.effort`` / ``reasoning_effort``
    effort_levels: ClassVar[tuple[str, ...]] = (
        "none",
        "minimal",
        "low",
        "medium",
        "high",
        "xhigh",
    )

    def upstream_url(self, bases: ProviderBases, path: str, query: str = "") -> str:
        """Under ``openai_url``, which already ends in ``/v1`` as ``OPENAI_BASE_URL`` does
        (so the client's ``/v1`` is not doubled)."""
        return with_query(bases.openai_url + (path[3:] if path.startswith("/v1/") else path), query)

    def key_headers(self, key: str) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {key}")]

    def error_body(self, status: int, message: str) -> bytes:
        return openai_error_body(status, message)

    def cache_ttl(self, body: Any) -> float:
        """24 h with ``prompt_cache_retention: "24h"``; otherwise an hour, the longest the
        in-memory cache is documented to survive idle (assuming less could break it)."""
        retention = body.get("prompt_cache_retention") if isinstance(body, dict) else None
        return TTL_24_HOURS if retention == "24h" else TTL_1_HOUR


class OpenAIChatAdapter(OpenAIAdapterBase):
    name: ClassVar[str] = "openai_chat"

    def system_text(self, body: Any) -> str:
        return "\n".join(
            text_of(m.get("content"), _TEXT_PARTS)
            for m in _messages(body)
            if isinstance(m, dict) and m.get("role") in _SYSTEM_ROLES
        )

    def message_count(self, body: Any) -> int:
        return len(_messages(body))

    def turn_end(self, body: Any) -> int:
        """``message_count`` without trailing system/developer messages: aider 0.86 sends its
        edit-format reminder as a system message after the user's ask, which is still the
        turn the model answers (counted with it, no ask of aider's was ever new)."""
        msgs = _messages(body)
        end = len(msgs)
        while (
            end and isinstance(msgs[end - 1], dict) and msgs[end - 1].get("role") in _SYSTEM_ROLES
        ):
            end -= 1
        return end

    def latest_user_index(self, body: Any) -> int | None:
        msgs = _messages(body)
        for i in range(len(msgs) - 1, -1, -1):
            if isinstance(msgs[i], dict) and msgs[i].get("role") == "user":
                return i
        return None

    def user_text(self, body: Any, index: int) -> str:
        msgs = _messages(body)
        m = msgs[index] if 0 <= index < len(msgs) else None
        return text_of(m.get("content"), _TEXT_PARTS) if isinstance(m, dict) else ""

    def first_user_text(self, body: Any) -> str | None:
        """The user's first words (``first_words``: a client's context message skipped)."""
        users = (m for m in _messages(body) if isinstance(m, dict) and m.get("role") == "user")
        return first_words(text_of(m.get("content"), _TEXT_PARTS) for m in users)

    def leading_user_texts(self, body: Any, count: int) -> list[str]:
        users = (m for m in _messages(body) if isinstance(m, dict) and m.get("role") == "user")
        return [
            text_of(m.get("content"), _TEXT_PARTS)
            for _, m in zip(range(count), users, strict=False)
        ]

    def tool_results(self, body: Any) -> list[ToolResult]:
        """The ``tool`` messages after the last assistant message."""
        out: list[ToolResult] = []
        for m in reversed(_messages(body)):
            if not isinstance(m, dict) or m.get("role") != "tool":
                break
            out.append(ToolResult(m.get("tool_call_id"), text_of(m.get("content"), _TEXT_PARTS)))
        return out[::-1]

    def recent_context(self, body: Any, before: int) -> tuple[list[str], list[str]]:
        tools: list[str] = []
        turns: list[str] = []
        for m in _messages(body)[:before]:
            if not isinstance(m, dict):
                continue
            if m.get("role") == "assistant":
                turns.append(text_of(m.get("content"), _TEXT_PARTS))
            elif m.get("role") == "tool":
                tools.append(text_of(m.get("content"), _TEXT_PARTS))
        return tools, turns

    def user_slot(self, body: Any, index: int) -> TextSlot:
        return TextSlot(("messages", index, "content"), body["messages"][index].get("content"))

    def usage(self, raw: Any) -> Usage:
        return openai_usage(raw, "prompt_tokens", "completion_tokens", "prompt_tokens_details")

    def parse_response(self, body: Any) -> AssembledMessage:
        msg = AssembledMessage(protocol=self.name, complete=True)
        if not isinstance(body, dict):
            msg.error = not_an_object()
            return msg
        if body.get("error"):
            msg.error = openai_answer_error(body["error"])
            return msg
        msg.id, msg.model = as_str(body.get("id")), as_str(body.get("model"))
        msg.usage = self.usage(body.get("usage"))
        choices = body.get("choices") or []
        if choices and isinstance(choices[0], dict):
            choice = choices[0]
            msg.stop_reason = choice.get("finish_reason")
            m = choice.get("message") or {}
            if isinstance(m.get("content"), str) and m["content"]:
                msg.blocks.append(Block("text", text=m["content"]))
            for call in m.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                fn = call.get("function") or {}
                msg.blocks.append(
                    Block(
                        "tool_use",
                        id=call.get("id"),
                        name=fn.get("name"),
                        input=_loads_or_raw(fn.get("arguments", "")),
                        raw=call,
                    )
                )
        return msg

    def assembler(self) -> ChatAssembler:
        return ChatAssembler()

    # -- output shaping ----------------------------------------------------------------------

    def turn_parts(self, body: Any) -> tuple[PartKind, ...]:
        """The trailing ``tool`` messages (an error by structured fields only: Chat has no
        ``is_error``), or the parts of a final user message, else ``()``."""
        msgs = _messages(body)
        last = msgs[-1] if msgs else None
        if not isinstance(last, dict):
            return ()
        if last.get("role") in _TOOL_ROLES:
            return _tool_parts(msgs)
        if last.get("role") != "user":
            return ()
        return part_kinds(last.get("content"), _PART_KINDS)

    def effort_fields(self, body: Any) -> EffortFields:
        if not isinstance(body, dict):
            return EffortFields()
        effort = body.get("reasoning_effort")
        reasoning = body.get("reasoning")
        if not isinstance(effort, str) and isinstance(reasoning, dict):
            effort = reasoning.get("effort")
        verbosity = body.get("verbosity")
        return EffortFields(
            effort=effort if isinstance(effort, str) else None,
            verbosity=verbosity if isinstance(verbosity, str) else None,
            verbosity_creatable=True,
        )

    def param_paths(self, body: Any) -> ParamPaths:
        """The effort ``effort_fields`` reports -- ``reasoning_effort``, else
        ``reasoning.effort`` (which some compatible servers take) -- and only that one: the
        plan was ranked against it, and writing it into the other could raise that one.
        Never created. The top-level ``verbosity``, replaced in place or added last."""
        effort: tuple[str | int, ...] | None = None
        if isinstance(body, dict) and isinstance(body.get("reasoning_effort"), str):
            effort = ("reasoning_effort",)
        elif self.effort_fields(body).effort is not None:
            effort = ("reasoning", "effort")
        return ParamPaths(effort=effort, verbosity=("verbosity",))

    def system_slot(self, body: Any, *, inherits_system: bool = True) -> TextSlot | None:
        """The end of the system prompt: the last system/developer message of the leading run
        (falling back to the last one anywhere). A string content gets the block after a
        blank line -- a string stays a string, since some compatible servers refuse part
        lists in system messages; a part list gets one more text part. Without a system
        message, nowhere: inserting one at the head would shift every message."""
        msgs = _messages(body)
        index = _system_target(msgs)
        if index is None:
            return None
        content = msgs[index].get("content")
        if not isinstance(content, str | list):
            return None
        return TextSlot(("messages", index, "content"), content, joins=True)

    def system_texts(self, body: Any) -> list[str]:
        """Each system/developer message's text, the last message first."""
        return [
            text_of(m.get("content"), _TEXT_PARTS)
            for m in reversed(_messages(body))
            if isinstance(m, dict) and m.get("role") in _SYSTEM_ROLES
        ]


def _tool_parts(msgs: list[Any]) -> tuple[PartKind, ...]:
    parts: list[PartKind] = []
    for m in reversed(msgs):
        if not isinstance(m, dict) or m.get("role") not in _TOOL_ROLES:
            break
        content = m.get("content")
        output = content if isinstance(content, str) else text_of(content, _TEXT_PARTS)
        parts.append("tool_error" if structured_error(output) else "tool_result")
    return tuple(reversed(parts))


def _system_target(msgs: list[Any]) -> int | None:
    """The last system/developer message of the leading run, else the last one anywhere.

    The head of the conversation is where the stable prompt lives; a developer message a
    client adds later in a session must not pull ember's block away from where earlier turns
    (and the cache) had it.
    """
    head = None
    for i, m in enumerate(msgs):
        if not (isinstance(m, dict) and m.get("role") in _SYSTEM_ROLES):
            break
        head = i
    if head is not None:
        return head
    for i in range(len(msgs) - 1, -1, -1):
        if isinstance(msgs[i], dict) and msgs[i].get("role") in _SYSTEM_ROLES:
            return i
    return None


def _loads_or_raw(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except (json.JSONDecodeError, TypeError):
        return raw


class ChatAssembler:
    """Assembles ``chat.completion.chunk`` deltas (choice 0) into the final message.

    Complete at ``data: [DONE]`` or once choice 0 has a ``finish_reason`` (the usage chunk may
    still follow, but the answer is whole). A chunk carrying an ``error`` object -- what OpenAI
    and compatible servers send when generation fails after the 200 -- becomes the ``error``.
    """

    def __init__(self) -> None:
        self.msg = AssembledMessage(protocol=OpenAIChatAdapter.name)
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}

    def feed(self, event: str | None, data: str) -> None:
        if data.strip() == "[DONE]":
            self.msg.complete = True
            return
        try:
            chunk = loads(data)
        except json.JSONDecodeError:
            return
        if not isinstance(chunk, dict):
            return
        if chunk.get("error"):
            self.msg.error = openai_answer_error(chunk["error"])
            return
        self.msg.id = self.msg.id or as_str(chunk.get("id"))
        self.msg.model = self.msg.model or as_str(chunk.get("model"))
        if chunk.get("usage"):
            self.msg.usage = OpenAIChatAdapter().usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        if choice.get("finish_reason"):
            self.msg.stop_reason = choice["finish_reason"]
            self.msg.complete = True
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self._text.append(delta["content"])
        for tc in delta.get("tool_calls") or []:
            call = self._calls.setdefault(as_int(tc.get("index")), {"args": []})
            call["id"] = call.get("id") or tc.get("id")
            fn = tc.get("function") or {}
            call["name"] = call.get("name") or fn.get("name")
            if fn.get("arguments"):
                call["args"].append(fn["arguments"])

    def result(self) -> AssembledMessage:
        text = "".join(self._text)
        self.msg.blocks = [Block("text", text=text)] if text else []
        for i in sorted(self._calls):
            c = self._calls[i]
            args = "".join(c["args"])
            fn = {"name": c.get("name"), "arguments": args}
            call: dict[str, Any] = {"id": c.get("id"), "type": "function", "function": fn}
            self.msg.blocks.append(
                Block(
                    "tool_use",
                    id=c.get("id"),
                    name=c.get("name"),
                    input=_loads_or_raw(args),
                    raw=call,
                )
            )
        return self.msg

"""Anthropic Messages (``POST /v1/messages``).

Request: ``system`` (string or text blocks), ``messages`` (role + string or content blocks),
``tools``, ``tool_choice``, ``thinking``, ``metadata``. Answer: content blocks ``text``,
``tool_use``, ``thinking`` (with an opaque ``signature``), ``redacted_thinking``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ember.protocols.base import (
    TTL_1_HOUR,
    TTL_5_MINUTES,
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
    with_query,
)
from ember.protocols.content import as_int, as_str, first_words, text_of
from ember.protocols.jsonedit import dumps, loads

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    502: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


#: The HTTP status the API gives each error type when it answers with an error before a
#: stream begins; an ``error`` event inside a 200 stream is counted with the same status.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def answer_error(raw: Any) -> AnswerError:
    """An ``error`` object (``{"type", "message"}``) as an :class:`AnswerError`; an unknown
    or missing type counts as a 500, as the API's own ``api_error`` does."""
    error = raw if isinstance(raw, dict) else {}
    kind, message = error.get("type"), error.get("message")
    kind = kind if isinstance(kind, str) and kind else "api_error"
    text = message if isinstance(message, str) else ("" if raw is None else dumps(raw))
    return AnswerError(kind, text, _ERROR_STATUS.get(kind, 500))


def _messages(body: Any) -> list[Any]:
    msgs = body.get("messages") if isinstance(body, dict) else None
    return msgs if isinstance(msgs, list) else []


def _turn(msgs: list[Any]) -> list[Any]:
    """The messages up to the latest turn's own last message: without trailing system-role
    messages (a note the client adds after the user's ask, as Claude Code 2.1.197 does on a
    session's first request: read as the last message, it hid the ask — no memory was
    injected into a Claude Code session's first ask, and its prefix was refused a hot fork
    as if it ended in a prefill)."""
    end = len(msgs)
    while end and isinstance(msgs[end - 1], dict) and msgs[end - 1].get("role") == "system":
        end -= 1
    return msgs[:end]


_PART_KINDS: dict[str, PartKind] = {"text": "text", "image": "image", "document": "document"}


def _part_kind(block: Any) -> PartKind:
    if isinstance(block, str):
        return "text"
    if not isinstance(block, dict):
        return "other"
    kind = block.get("type")
    if kind == "tool_result":
        return "tool_error" if block.get("is_error") is True else "tool_result"
    return _PART_KINDS.get(kind, "other") if isinstance(kind, str) else "other"


def _has_long_ttl(value: Any) -> bool:
    """Whether a block (or a tool definition) carries ``cache_control`` with ``ttl: "1h"``,
    on itself or on a block nested in its ``content``."""
    if not isinstance(value, dict):
        return False
    marker = value.get("cache_control")
    if isinstance(marker, dict) and marker.get("ttl") == "1h":
        return True
    inner = value.get("content")
    return isinstance(inner, list) and any(_has_long_ttl(b) for b in inner)


def _is_tool_result_only(content: Any) -> bool:
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


class AnthropicAdapter(AdapterBase):
    name: ClassVar[str] = "anthropic"
    family: ClassVar[str] = "anthropic"
    #: ``output_config.effort``; Anthropic has no ``none`` or ``minimal``
    effort_levels: ClassVar[tuple[str, ...]] = ("low", "medium", "high", "xhigh", "max")

    def upstream_url(self, bases: ProviderBases, path: str, query: str = "") -> str:
        """Under ``anthropic_url``, the path as the client sent it."""
        return with_query(bases.anthropic_url + path, query)

    def key_headers(self, key: str) -> list[tuple[str, str]]:
        return [("x-api-key", key), ("anthropic-version", "2023-06-01")]

    def system_text(self, body: Any) -> str:
        return text_of(body.get("system")) if isinstance(body, dict) else ""

    def message_count(self, body: Any) -> int:
        return len(_messages(body))

    def turn_end(self, body: Any) -> int:
        return len(_turn(_messages(body)))

    def latest_user_index(self, body: Any) -> int | None:
        """Index of the last user message that carries something besides tool results
        (a new ask); a turn of tool results alone is a continuation, not an ask."""
        msgs = _messages(body)
        for i in range(len(msgs) - 1, -1, -1):
            m = msgs[i]
            if (
                isinstance(m, dict)
                and m.get("role") == "user"
                and not _is_tool_result_only(m.get("content"))
            ):
                return i
        return None

    def user_text(self, body: Any, index: int) -> str:
        msgs = _messages(body)
        m = msgs[index] if 0 <= index < len(msgs) else None
        return text_of(m.get("content")) if isinstance(m, dict) else ""

    def first_user_text(self, body: Any) -> str | None:
        """The user's first words (``first_words``: a client's context message skipped)."""
        users = (m for m in _messages(body) if isinstance(m, dict) and m.get("role") == "user")
        return first_words(text_of(m.get("content")) for m in users)

    def leading_user_texts(self, body: Any, count: int) -> list[str]:
        users = (m for m in _messages(body) if isinstance(m, dict) and m.get("role") == "user")
        return [text_of(m.get("content")) for _, m in zip(range(count), users, strict=False)]

    def tool_results(self, body: Any) -> list[ToolResult]:
        """The tool results of this turn: those in the last message, when it is a user turn."""
        msgs = _turn(_messages(body))
        if not msgs or not isinstance(msgs[-1], dict) or msgs[-1].get("role") != "user":
            return []
        content = msgs[-1].get("content")
        if not isinstance(content, list):
            return []
        return [
            ToolResult(
                b.get("tool_use_id"),
                text_of(b.get("content")),
                bool(b.get("is_error", False)),
            )
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]

    def recent_context(self, body: Any, before: int) -> tuple[list[str], list[str]]:
        tools: list[str] = []
        turns: list[str] = []
        for m in _messages(body)[:before]:
            if not isinstance(m, dict) or not isinstance(m.get("content"), list | str):
                continue
            if m.get("role") == "assistant":
                turns.append(text_of(m["content"]))
            elif isinstance(m["content"], list):
                tools += [
                    text_of(b.get("content"))
                    for b in m["content"]
                    if isinstance(b, dict) and b.get("type") == "tool_result"
                ]
        return tools, turns

    def user_slot(self, body: Any, index: int) -> TextSlot:
        return TextSlot(("messages", index, "content"), body["messages"][index].get("content"))

    def usage(self, raw: Any) -> Usage:
        if not isinstance(raw, dict):
            return Usage()
        creation = raw.get("cache_creation")
        one_hour = (
            as_int(creation.get("ephemeral_1h_input_tokens")) if isinstance(creation, dict) else 0
        )
        return Usage(
            input_tokens=as_int(raw.get("input_tokens")),
            cache_read_tokens=as_int(raw.get("cache_read_input_tokens")),
            cache_write_tokens=as_int(raw.get("cache_creation_input_tokens")),
            cache_write_1h_tokens=one_hour,
            output_tokens=as_int(raw.get("output_tokens")),
        )

    def parse_response(self, body: Any) -> AssembledMessage:
        msg = AssembledMessage(protocol=self.name, complete=True)
        if not isinstance(body, dict):
            msg.error = not_an_object()
            return msg
        if body.get("type") == "error":
            msg.error = answer_error(body.get("error"))
            return msg
        msg.id, msg.model = as_str(body.get("id")), as_str(body.get("model"))
        msg.stop_reason = body.get("stop_reason")
        msg.usage = self.usage(body.get("usage"))
        for b in body.get("content") or []:
            if isinstance(b, dict):
                msg.blocks.append(_block_from_json(b))
        return msg

    def assembler(self) -> AnthropicAssembler:
        return AnthropicAssembler()

    def error_body(self, status: int, message: str) -> bytes:
        kind = _ERROR_TYPES.get(status, "api_error")
        return dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()

    # -- output shaping ----------------------------------------------------------------------

    def turn_parts(self, body: Any) -> tuple[PartKind, ...]:
        """The kinds of the blocks of the last message when it is a user turn, else ``()``
        (an assistant prefill or an empty request is nobody's new turn)."""
        msgs = _turn(_messages(body))
        last = msgs[-1] if msgs else None
        if not isinstance(last, dict) or last.get("role") != "user":
            return ()
        content = last.get("content")
        if isinstance(content, str):
            return ("text",)
        if not isinstance(content, list):
            return ()
        return tuple(_part_kind(b) for b in content)

    def cache_ttl(self, body: Any) -> float:
        """One hour when a breakpoint asks for ``ttl: "1h"``, else five minutes.

        Looks at the top-level marker, tools, system and the last two messages: an entry is
        written where a breakpoint sits when the request is sent, which is the tail (a
        moving breakpoint) or the stable head, so scanning the whole history every turn is
        not needed; callers keep the longest TTL they have seen for a session.
        Over-estimating is the safe direction: a level change waits for an idle period this
        long, and waiting too little would break a cache the client paid 2x to keep an hour.
        """
        if not isinstance(body, dict):
            return TTL_5_MINUTES
        top = body.get("cache_control")
        if isinstance(top, dict) and top.get("ttl") == "1h":
            return TTL_1_HOUR
        regions: list[Any] = []
        for key in ("tools", "system"):
            if isinstance(body.get(key), list):
                regions.extend(body[key])
        for m in _messages(body)[-2:]:
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                regions.extend(m["content"])
        return TTL_1_HOUR if any(_has_long_ttl(b) for b in regions) else TTL_5_MINUTES

    def effort_fields(self, body: Any) -> EffortFields:
        if not isinstance(body, dict):
            return EffortFields()
        config, thinking = body.get("output_config"), body.get("thinking")
        effort = config.get("effort") if isinstance(config, dict) else None
        kind = thinking.get("type") if isinstance(thinking, dict) else None
        budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
        return EffortFields(
            effort=effort if isinstance(effort, str) else None,
            thinking_type=kind if isinstance(kind, str) else None,
            thinking_budget=budget
            if isinstance(budget, int) and not isinstance(budget, bool)
            else None,
        )

    def param_paths(self, body: Any) -> ParamPaths:
        """Effort and thinking budget only where the client sent them; Anthropic has no
        verbosity parameter."""
        fields = self.effort_fields(body)
        return ParamPaths(
            effort=("output_config", "effort") if fields.effort is not None else None,
            thinking_budget=(
                ("thinking", "budget_tokens") if fields.thinking_budget is not None else None
            ),
        )

    def system_slot(self, body: Any, *, inherits_system: bool = True) -> TextSlot | None:
        """The ``system`` field (created when absent; a string becomes one text block first,
        which the API treats as the same prompt). Its blocks, and the ``cache_control``
        breakpoints on them, keep their bytes."""
        system = body.get("system") if isinstance(body, dict) else None
        if system is None or isinstance(system, str | list):
            return TextSlot(("system",), system)
        return None

    def system_texts(self, body: Any) -> list[str]:
        """The system prompt's texts, last block first."""
        system = body.get("system") if isinstance(body, dict) else None
        texts: list[Any] = [system]
        if isinstance(system, list):
            texts = [b.get("text") for b in reversed(system) if isinstance(b, dict)]
        return [t for t in texts if isinstance(t, str)]


def _block_from_json(b: dict[str, Any]) -> Block:
    """A content block; ``raw`` keeps the provider's JSON of it (for a streamed block, the
    ``content_block_start`` block, which its deltas complete) so a block type ember does not
    model (``server_tool_use``, ``web_search_tool_result``...) can still be replayed."""
    return Block(
        type=str(b.get("type")),
        text=b.get("text") or b.get("thinking") or "",
        id=b.get("id"),
        name=b.get("name"),
        input=b.get("input"),
        signature=b.get("signature"),
        data=b.get("data"),
        raw=b,
    )


def _add_citation(raw: dict[str, Any], citation: Any) -> None:
    """Collect a streamed citation into the block's JSON (the start block may say
    ``"citations": null``): a text block replayed without them loses what it cited."""
    cited = raw.get("citations")
    raw["citations"] = [*(cited if isinstance(cited, list) else []), citation]


class AnthropicAssembler:
    """Assembles ``message_start`` ... ``message_stop`` into the final message.

    Usage starts from ``message_start`` and every counter present in ``message_delta`` replaces
    the earlier value (the final delta carries the true ``output_tokens``). The answer is
    complete once ``message_stop`` or a ``message_delta`` with a ``stop_reason`` arrived: the
    SDK takes a stream that ends after that delta as whole, so ember must too. An ``error``
    event (``overloaded_error`` after a 200) is kept as the message's ``error``.
    """

    def __init__(self) -> None:
        self.msg = AssembledMessage(protocol=AnthropicAdapter.name)
        self._usage: dict[str, Any] = {}
        self._blocks: dict[int, Block] = {}
        self._json: dict[int, list[str]] = {}

    def feed(self, event: str | None, data: str) -> None:
        try:
            payload = loads(data)
        except json.JSONDecodeError:
            return
        if not isinstance(payload, dict):
            return
        kind = payload.get("type", event)
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(payload)

    def _on_message_start(self, p: dict[str, Any]) -> None:
        m = p.get("message") or {}
        self.msg.id, self.msg.model = as_str(m.get("id")), as_str(m.get("model"))
        self._usage.update(m.get("usage") or {})

    def _on_content_block_start(self, p: dict[str, Any]) -> None:
        idx = as_int(p.get("index"))
        block = _block_from_json(p.get("content_block") or {})
        if block.type == "tool_use":
            block.input = None
            self._json[idx] = []
        self._blocks[idx] = block

    def _on_content_block_delta(self, p: dict[str, Any]) -> None:
        block = self._blocks.get(as_int(p.get("index")))
        d = p.get("delta") or {}
        if block is None:
            return
        kind = d.get("type")
        if kind == "text_delta":
            block.text += d.get("text", "")
        elif kind == "thinking_delta":
            block.text += d.get("thinking", "")
        elif kind == "signature_delta":
            block.signature = (block.signature or "") + d.get("signature", "")
        elif kind == "input_json_delta":
            self._json.setdefault(as_int(p.get("index")), []).append(d.get("partial_json", ""))
        elif kind == "citations_delta" and block.raw is not None:
            _add_citation(block.raw, d.get("citation"))

    def _on_content_block_stop(self, p: dict[str, Any]) -> None:
        idx = as_int(p.get("index"))
        parts = self._json.pop(idx, None)
        block = self._blocks.get(idx)
        if block is not None and parts is not None:
            raw = "".join(parts)
            try:
                block.input = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                block.input = raw

    def _on_message_delta(self, p: dict[str, Any]) -> None:
        d = p.get("delta") or {}
        if d.get("stop_reason") is not None:
            self.msg.stop_reason = d["stop_reason"]
            self.msg.complete = True
        self._usage.update({k: v for k, v in (p.get("usage") or {}).items() if v is not None})

    def _on_message_stop(self, p: dict[str, Any]) -> None:
        self.msg.complete = True

    def _on_error(self, p: dict[str, Any]) -> None:
        self.msg.error = answer_error(p.get("error"))

    def result(self) -> AssembledMessage:
        self.msg.blocks = [self._blocks[i] for i in sorted(self._blocks)]
        self.msg.usage = AnthropicAdapter().usage(self._usage) if self._usage else None
        return self.msg

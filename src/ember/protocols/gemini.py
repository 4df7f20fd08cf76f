"""Google Gemini (``POST /v1beta/models/{model}:generateContent`` and
``:streamGenerateContent``).

The model and whether the answer streams are in the *path*, not the body: the proxy binds an
adapter to them per request (``adapter_for_path``), so ``model`` and ``is_stream`` answer as
they do for the other wire formats. Request: ``contents`` (``gemini_parts``),
``systemInstruction`` (a content of text parts), ``tools`` (``functionDeclarations``),
``toolConfig``, ``generationConfig``. A stream (``?alt=sse``) is ``data:`` events, each a whole
``GenerateContentResponse`` holding the next piece of the answer; the last carries the
``finishReason`` and the usage. Without ``alt=sse`` the same chunks come as one JSON array.

Gemini caches implicitly: there are no breakpoints to read or keep, and a request whose
prefix matches an earlier one reports the part read as ``cachedContentTokenCount``, which is
*inside* ``promptTokenCount`` (``gemini_usage`` splits it out).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ember.protocols import gemini_parts as gp
from ember.protocols.base import (
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
from ember.protocols.content import as_int, as_str
from ember.protocols.jsonedit import dumps, loads

#: Google's canonical status names by HTTP status (what ``error.status`` says).
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
#: The HTTP status Google gives each status name, for an error inside a 200 stream.
_NAME_STATUS = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ABORTED": 409,
    "ALREADY_EXISTS": 409,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INTERNAL": 500,
    "DATA_LOSS": 500,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}
#: What a part of an ask is, by its media type (the rest of a part: ``PartKind`` "other").
_MEDIA_KINDS: tuple[tuple[str, PartKind], ...] = (
    ("image/", "image"),
    ("application/pdf", "document"),
    ("text/", "document"),
)


def gemini_error_body(status: int, message: str) -> bytes:
    """Google's error shape, which the GenAI SDKs read: ``{"error": {"code", "message",
    "status"}}``."""
    name = _STATUS_NAMES.get(status) or ("INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
    return dumps({"error": {"code": status, "message": message, "status": name}}).encode()


def gemini_answer_error(raw: Any) -> AnswerError:
    """An ``error`` object as an :class:`AnswerError`: named by its ``status`` (else its
    code), with the HTTP status its ``code`` says (else the one its name has, else 500)."""
    error = raw if isinstance(raw, dict) else {}
    code, name, message = error.get("code"), error.get("status"), error.get("message")
    status = code if isinstance(code, int) and 400 <= code <= 599 else None
    if status is None:
        status = _NAME_STATUS.get(name, 500) if isinstance(name, str) else 500
    kind = name if isinstance(name, str) and name else _STATUS_NAMES.get(status, "INTERNAL")
    text = message if isinstance(message, str) else ("" if raw is None else dumps(raw))
    return AnswerError(kind, text, status)


def gemini_usage(raw: Any) -> Usage:
    """``usageMetadata`` in ember's counters, which never overlap.

    ``promptTokenCount`` includes ``cachedContentTokenCount`` (the implicit cache's read):
    without the split a cached prompt would be priced twice. ``thoughtsTokenCount`` is billed
    as output but is not in ``candidatesTokenCount``, so output is their sum (and the thoughts
    its reasoning part, as OpenAI's ``reasoning_tokens`` are); ``toolUsePromptTokenCount``
    (what a built-in tool such as search added to the prompt) is fresh input.
    """
    if not isinstance(raw, dict):
        return Usage()
    prompt = as_int(gp.field(raw, "promptTokenCount", "prompt_token_count"))
    cached = as_int(gp.field(raw, "cachedContentTokenCount", "cached_content_token_count"))
    answer = as_int(gp.field(raw, "candidatesTokenCount", "candidates_token_count"))
    thoughts = as_int(gp.field(raw, "thoughtsTokenCount", "thoughts_token_count"))
    tools = as_int(gp.field(raw, "toolUsePromptTokenCount", "tool_use_prompt_token_count"))
    return Usage(
        input_tokens=max(prompt - cached, 0) + tools,
        cache_read_tokens=min(cached, prompt) if prompt else cached,
        output_tokens=answer + thoughts,
        reasoning_tokens=thoughts,
    )


def model_name(value: Any) -> str | None:
    """A model as a name (``models/gemini-2.5-pro`` and ``gemini-2.5-pro`` are one model)."""
    name = as_str(value)
    return name.removeprefix("models/") if name else None


def _system(body: Any) -> tuple[str, Any]:
    key = gp.field_key(body, "systemInstruction", "system_instruction")
    return key, body.get(key) if isinstance(body, dict) else None


def _system_parts(body: Any) -> list[Any]:
    _, system = _system(body)
    if isinstance(system, str):
        return [{"text": system}]
    return gp.parts(system)


def _generation(body: Any) -> dict[str, Any]:
    found = gp.field(body, "generationConfig", "generation_config")
    return found if isinstance(found, dict) else {}


def _part_kind(part: Any) -> PartKind:
    if not isinstance(part, dict):
        return "other"
    response = gp.response_of(part)
    if response is not None:
        return "tool_error" if gp.response_failed(response.get("response")) else "tool_result"
    if gp.visible_text(part) is not None:
        return "text"
    media = gp.field(part, "inlineData", "inline_data") or gp.field(part, "fileData", "file_data")
    mime = gp.field(media, "mimeType", "mime_type")
    if isinstance(mime, str):
        return next((kind for prefix, kind in _MEDIA_KINDS if mime.startswith(prefix)), "other")
    return "other"


class GeminiAdapter(AdapterBase):
    """Gemini's wire format, bound to the request's model and method (see the module)."""

    name: ClassVar[str] = "gemini"
    family: ClassVar[str] = "gemini"
    #: ``thinkingConfig.thinkingLevel``
    effort_levels: ClassVar[tuple[str, ...]] = ("minimal", "low", "medium", "high")

    def __init__(self, model: str | None = None, *, stream: bool = False) -> None:
        self._model = model
        self._stream = stream

    def __repr__(self) -> str:
        return f"GeminiAdapter(model={self._model!r}, stream={self._stream})"

    def bound(self, model: str | None, *, stream: bool) -> GeminiAdapter:
        return GeminiAdapter(model_name(model), stream=stream)

    def upstream_url(self, bases: ProviderBases, path: str, query: str = "") -> str:
        """Under ``gemini_url``, the path as the client sent it."""
        return with_query(bases.gemini_url + path, query)

    def key_headers(self, key: str) -> list[tuple[str, str]]:
        return [("x-goog-api-key", key)]

    def model(self, body: Any) -> str | None:
        """The path's model; a request sent without one (ember's own) may name it in the
        body's ``model`` field, which the API also reads."""
        if self._model:
            return self._model
        return model_name(body.get("model")) if isinstance(body, dict) else None

    def is_stream(self, body: Any) -> bool:
        return self._stream

    # -- reading the conversation -----------------------------------------------------------

    def system_text(self, body: Any) -> str:
        return gp.text_of(_system_parts(body))

    def message_count(self, body: Any) -> int:
        return len(gp.contents(body))

    def latest_user_index(self, body: Any) -> int | None:
        """The last user content that asks something (function responses alone continue the
        model's turn)."""
        items = gp.contents(body)
        for i in range(len(items) - 1, -1, -1):
            if gp.has_ask(items[i]):
                return i
        return None

    def user_text(self, body: Any, index: int) -> str:
        items = gp.contents(body)
        return gp.text_of(items[index]) if 0 <= index < len(items) else ""

    def first_user_text(self, body: Any) -> str | None:
        """The user's first words: the first user text left once Gemini CLI's
        ``<session_context>`` is taken out (that block is the same for every session begun in
        a directory on a day, so as the first words it made all of them one session); the
        first user text as it is when no user content holds anything else."""
        first: str | None = None
        for c in gp.contents(body):
            if not (isinstance(c, dict) and gp.role(c) == "user"):
                continue
            text = gp.text_of(c)
            words = gp.SESSION_CONTEXT.sub("", text).strip()
            if words:
                return words
            first = text if first is None else first
        return first

    def leading_user_texts(self, body: Any, count: int) -> list[str]:
        users = (c for c in gp.contents(body) if isinstance(c, dict) and gp.role(c) == "user")
        return [gp.text_of(c) for _, c in zip(range(count), users, strict=False)]

    def tool_results(self, body: Any) -> list[ToolResult]:
        """The function responses of the last content, when it is the user's side."""
        items = gp.contents(body)
        if not items or gp.role(items[-1]) not in gp.USER_ROLES:
            return []
        previous = items[-2] if len(items) > 1 else None
        return [
            ToolResult(key, gp.response_text(response), gp.response_failed(response))
            for _, key, _, response in gp.responses(previous, items[-1])
        ]

    def recent_context(self, body: Any, before: int) -> tuple[list[str], list[str]]:
        tools: list[str] = []
        turns: list[str] = []
        for c in gp.contents(body)[:before]:
            if gp.is_model(c):
                turns.append(gp.text_of(c))
                continue
            for part in gp.parts(c):
                response = gp.response_of(part)
                if response is not None:
                    tools.append(gp.response_text(response.get("response")))
        return tools, turns

    def user_slot(self, body: Any, index: int) -> TextSlot:
        """A new text part after the content's last part (never into one: a client's part
        keeps its bytes)."""
        content = body["contents"][index]
        return TextSlot(("contents", index, "parts"), gp.parts(content), part_type=None)

    # -- the answer ------------------------------------------------------------------------

    def usage(self, raw: Any) -> Usage:
        return gemini_usage(raw)

    def parse_response(self, body: Any) -> AssembledMessage:
        """A JSON answer: one ``GenerateContentResponse``, or (a stream asked for without
        ``alt=sse``) an array of them, read as the stream they are."""
        asm = GeminiAssembler()
        if isinstance(body, list):
            for chunk in body:
                asm.chunk(chunk)
            return asm.result()
        if not isinstance(body, dict):
            msg = AssembledMessage(protocol=self.name, complete=True)
            msg.error = not_an_object()
            return msg
        asm.chunk(body)
        msg = asm.result()
        msg.complete = True
        return msg

    def assembler(self) -> GeminiAssembler:
        return GeminiAssembler()

    def error_body(self, status: int, message: str) -> bytes:
        return gemini_error_body(status, message)

    # -- output shaping --------------------------------------------------------------------

    def turn_parts(self, body: Any) -> tuple[PartKind, ...]:
        """The kinds of the parts of the last content when it is the user's side, else ``()``
        (a model turn at the end is a prefill, nobody's new turn)."""
        items = gp.contents(body)
        if not items or gp.role(items[-1]) not in gp.USER_ROLES:
            return ()
        return tuple(_part_kind(p) for p in gp.parts(items[-1]))

    def tool_names(self, body: Any) -> tuple[str, ...]:
        """The declared functions' names and each built-in tool's key (``googleSearch``...),
        sorted."""
        tools = body.get("tools") if isinstance(body, dict) else None
        names: list[str] = []
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict):
                continue
            declared = gp.field(tool, "functionDeclarations", "function_declarations")
            if isinstance(declared, list):
                names += [d["name"] for d in declared if isinstance(d, dict) and _named(d)]
            names += [k for k in tool if k not in ("functionDeclarations", "function_declarations")]
        return tuple(sorted(names))

    def wants_structured_output(self, body: Any) -> bool:
        """JSON mode (``responseMimeType: application/json``) or a response schema: what a
        router or a classifier asks for (Gemini CLI's model router), never the agent's turn."""
        config = _generation(body)
        mime = gp.field(config, "responseMimeType", "response_mime_type")
        schema = gp.field(config, "responseSchema", "response_schema") or gp.field(
            config, "responseJsonSchema", "response_json_schema"
        )
        return mime == "application/json" or schema is not None

    def cache_ttl(self, body: Any) -> float:
        """Five minutes. Gemini documents no lifetime for its implicit cache; entries are
        seen to last minutes, not hours, so a fork later than this would be billed cold."""
        return TTL_5_MINUTES

    def effort_fields(self, body: Any) -> EffortFields:
        """``thinkingConfig.thinkingLevel`` as the effort, ``thinkingBudget`` as the budget
        (read only: see ``param_paths``)."""
        config = gp.field(_generation(body), "thinkingConfig", "thinking_config")
        level = gp.field(config, "thinkingLevel", "thinking_level")
        budget = gp.field(config, "thinkingBudget", "thinking_budget")
        return EffortFields(
            effort=level if isinstance(level, str) else None,
            thinking_budget=budget
            if isinstance(budget, int) and not isinstance(budget, bool)
            else None,
        )

    def param_paths(self, body: Any) -> ParamPaths:
        """Nowhere: whether Gemini keys its implicit cache on the thinking settings is not
        documented, and ember never risks a session's cache on a guess (a changed level that
        turned every read into fresh input would cost more than any thinking it saves)."""
        return ParamPaths()

    def system_slot(self, body: Any, *, inherits_system: bool = True) -> TextSlot | None:
        """One more text part after ``systemInstruction``'s parts (a string instruction stays
        a string, the block after a blank line). Without a system instruction, nowhere: one
        created would sit in front of every content, moving the whole cached prefix."""
        key, system = _system(body)
        if isinstance(system, str):
            return TextSlot((key,), system, joins=True)
        if not isinstance(system, dict) or not isinstance(system.get("parts"), list):
            return None
        return TextSlot((key, "parts"), system["parts"], part_type=None)

    def system_texts(self, body: Any) -> list[str]:
        """The system instruction's texts, the last part first."""
        return [t for p in reversed(_system_parts(body)) if (t := gp.visible_text(p)) is not None]


def _named(declaration: dict[str, Any]) -> bool:
    return isinstance(declaration.get("name"), str)


def _merges(last: dict[str, Any] | None, part: dict[str, Any]) -> bool:
    """Whether a streamed text part continues the text part before it: both text, both
    thinking or both not, and the one before not yet signed (a signature closes a part)."""
    if last is None or not isinstance(part.get("text"), str):
        return False
    return (
        isinstance(last.get("text"), str)
        and gp.is_thought(last) == gp.is_thought(part)
        and "thoughtSignature" not in last
        and not gp.call_of(last)
    )


def _block(part: dict[str, Any]) -> Block:
    call = gp.call_of(part)
    if call is not None:
        given = call.get("id")
        args = call.get("args")
        return Block(
            "tool_use",
            id=given if isinstance(given, str) and given else None,
            name=as_str(call.get("name")),
            input=args if args is not None else {},
            raw=part,
        )
    signature = as_str(part.get("thoughtSignature"))
    text = part.get("text")
    if isinstance(text, str):
        kind = "thinking" if gp.is_thought(part) else "text"
        return Block(kind, text=text, signature=signature, raw=part)
    key = next((k for k in part if k != "thoughtSignature"), "other")
    return Block(key, signature=signature, raw=part)


class GeminiAssembler:
    """Assembles streamed ``GenerateContentResponse`` chunks (candidate 0) into the answer.

    Text arrives in pieces, one part per chunk: consecutive text parts of the same kind are
    joined into one, and a ``thoughtSignature`` (which may come on a last, empty part) stays
    on the part it closes, so the answer can be sent back as the API requires (Gemini 3
    refuses a function call replayed without its signature). Usage: the last
    ``usageMetadata`` seen. Complete once a ``finishReason`` arrived, or the prompt was
    blocked (``promptFeedback.blockReason``); the stop reason is the finish reason in lower
    case (``STOP`` is ``stop``, as the other formats say it). A chunk holding ``error`` (an
    error after the 200) is the answer's error.
    """

    def __init__(self) -> None:
        self.msg = AssembledMessage(protocol=GeminiAdapter.name)
        self._parts: list[dict[str, Any]] = []
        self._usage: Any = None

    def feed(self, event: str | None, data: str) -> None:
        try:
            payload = loads(data)
        except json.JSONDecodeError:
            return
        if isinstance(payload, list):  # a JSON-array stream read as events
            for chunk in payload:
                self.chunk(chunk)
        else:
            self.chunk(payload)

    def chunk(self, payload: Any) -> None:
        if not isinstance(payload, dict):
            return
        if payload.get("error"):
            self.msg.error = gemini_answer_error(payload["error"])
            return
        self.msg.id = self.msg.id or as_str(gp.field(payload, "responseId", "response_id"))
        version = model_name(gp.field(payload, "modelVersion", "model_version"))
        self.msg.model = self.msg.model or version
        usage = gp.field(payload, "usageMetadata", "usage_metadata")
        if isinstance(usage, dict):
            self._usage = usage
        feedback = gp.field(payload, "promptFeedback", "prompt_feedback")
        blocked = gp.field(feedback, "blockReason", "block_reason")
        if isinstance(blocked, str) and blocked:
            self.msg.stop_reason, self.msg.complete = blocked.lower(), True
        for candidate in payload.get("candidates") or []:
            if isinstance(candidate, dict) and as_int(candidate.get("index")) == 0:
                self._candidate(candidate)

    def _candidate(self, candidate: dict[str, Any]) -> None:
        for part in gp.parts(candidate.get("content")):
            if isinstance(part, dict):
                self._add(part)
        finish = gp.field(candidate, "finishReason", "finish_reason")
        if isinstance(finish, str) and finish:
            self.msg.stop_reason, self.msg.complete = finish.lower(), True

    def _add(self, part: dict[str, Any]) -> None:
        last = self._parts[-1] if self._parts else None
        if last is not None and _merges(last, part):
            last["text"] += part["text"]
            if "thoughtSignature" in part:
                last["thoughtSignature"] = part["thoughtSignature"]
            return
        self._parts.append(dict(part))

    def result(self) -> AssembledMessage:
        self.msg.blocks = [_block(p) for p in self._parts]
        self.msg.usage = gemini_usage(self._usage) if self._usage is not None else None
        return self.msg

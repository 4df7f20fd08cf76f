"""The emulator's endpoints: validate a request, pick its reply, render it at response start.

Each handler returns a :class:`Pending`: the reply (for its wire timing) and a ``finish``
method that evaluates the prompt cache, renders and keeps the usage it answered with. The
emulator calls ``finish`` only after the reply's ``delay_headers`` has passed, and not at all
when the caller gave up meanwhile: cache entries are committed when the response begins, as on
the real APIs. Validation errors are answered at once and consume no scripted reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ember.testing import (
    prompt_anthropic,
    prompt_openai,
    render_anthropic,
    render_chat,
    render_responses,
)
from ember.testing.prompt_anthropic import CacheControlError, parse_prompt
from ember.testing.render_common import (
    Rendered,
    Turn,
    anthropic_error,
    close_after,
    json_response,
    openai_error,
    reply_headers,
)
from ember.testing.render_gemini import gemini_error
from ember.testing.replies import Reply, default_thinking, signature_is_valid

if TYPE_CHECKING:
    from ember.testing.emulator import Emulator, RecordedRequest


@dataclass(frozen=True, slots=True)
class Usage:
    """The usage an answer reported, as ember normalises it (``ember.protocols.base.Usage``):
    ``input_tokens`` is fresh input only (OpenAI's prompt count minus its cached tokens), so
    the counters never overlap and a log of them can be summed."""

    input_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0


@dataclass(slots=True)
class Pending:
    """An answer decided but not yet rendered; ``reply is None`` means answer immediately.

    ``usage`` is None until :meth:`finish` has run, and stays None for an answer without
    usage (an error, a refusal, a count): a caller that gave up before the answer began
    never committed a cache entry, and its log line must not claim one.
    """

    reply: Reply | None
    render: Callable[[], tuple[Rendered, Usage | None]]
    usage: Usage | None = None

    def finish(self) -> Rendered:
        """Evaluate the prompt cache and render (once: the cache commits its writes)."""
        rendered, self.usage = self.render()
        return rendered


class BadRequest(Exception):
    """A request the real API would refuse with a 400; carries the message and param."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def _now(rendered: Rendered) -> Pending:
    return Pending(None, lambda: (rendered, None))


def _parse(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"The request body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadRequest("The request body must be a JSON object.")
    return value


#: The JSON types a required field must have; a wrong type is a 400, as on the real APIs.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "max_tokens": (int,),
    "messages": (list,),
    "input": (str, list),
}


def _require(body: dict[str, Any], anthropic: bool, *names: str) -> None:
    for name in names:
        if name not in body:
            text = (
                f"{name}: Field required" if anthropic else f"Missing required parameter: '{name}'."
            )
            raise BadRequest(text, name)
        value, kinds = body[name], _FIELD_TYPES.get(name, (object,))
        if isinstance(value, bool) or not isinstance(value, kinds):
            expected = " or ".join(k.__name__ for k in kinds)
            raise BadRequest(f"{name}: expected {expected}, got {type(value).__name__}", name)


def _anthropic_bad(exc: BadRequest) -> Pending:
    return _now(anthropic_error(400, exc.message, "invalid_request_error"))


def _openai_bad(exc: BadRequest) -> Pending:
    return _now(openai_error(400, exc.message, "invalid_request_error", param=exc.param))


def _honour_tool_choice(body: dict[str, Any], reply: Reply) -> Reply:
    """``tool_choice`` none forbids tool calls, as on the real APIs: a scripted call is
    dropped (its text, or a fixed sentence, is answered instead)."""
    choice = body.get("tool_choice")
    forbidden = choice == "none" or (isinstance(choice, dict) and choice.get("type") == "none")
    if not forbidden or not reply.tool_calls:
        return reply
    return reply.replace(tool_calls=(), text=reply.text or "No tools were allowed for this turn.")


def _thinking_on(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _check_prewarm(body: dict[str, Any]) -> None:
    """``max_tokens: 0`` only warms the cache; the real API refuses it with these options."""
    if body.get("max_tokens") != 0:
        return
    choice = body.get("tool_choice")
    forced = isinstance(choice, dict) and choice.get("type") in ("any", "tool")
    if body.get("stream") or _thinking_on(body) or forced:
        raise BadRequest("max_tokens: 0 cannot be combined with stream, thinking or a forced tool")


def _check_signatures(body: dict[str, Any]) -> None:
    """Thinking blocks of the latest assistant turn must come back exactly as issued."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for n in range(len(messages) - 1, -1, -1):
        if messages[n].get("role") != "assistant":
            continue
        content = messages[n].get("content")
        for m, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("type") == "thinking":
                thinking = str(block.get("thinking", ""))
                if not signature_is_valid(thinking, str(block.get("signature", ""))):
                    raise BadRequest(
                        f"messages.{n}.content.{m}: `thinking` or `redacted_thinking` blocks in "
                        "the latest assistant message cannot be modified. These blocks must "
                        "remain as they were in the original response."
                    )
        return


def messages(emu: Emulator, request: RecordedRequest) -> Pending:
    """``POST /v1/messages``."""
    try:
        body = _parse(request.body)
        _require(body, True, "model", "max_tokens", "messages")
        _check_prewarm(body)
        prompt = parse_prompt(body)
        if emu.verify_thinking_signatures:
            _check_signatures(body)
    except BadRequest as exc:
        return _anthropic_bad(exc)
    except CacheControlError as exc:
        return _anthropic_bad(BadRequest(str(exc)))
    reply = emu.next_reply(body, request.path, lambda: prompt_anthropic.latest_user_text(body))
    reply = _honour_tool_choice(body, reply)
    if reply.is_error:
        return Pending(reply, lambda: (_error(reply, True), None))
    if reply.thinking is None and _thinking_on(body):
        reply = reply.replace(thinking=default_thinking(prompt_anthropic.latest_user_text(body)))
    api_key = request.api_key

    def finish() -> tuple[Rendered, Usage]:
        usage = emu.commit_anthropic(prompt, api_key)
        turn = emu.turn(str(body["model"]), reply, body)
        prewarm = body.get("max_tokens") == 0
        if body.get("stream"):
            rendered = render_anthropic.render_stream(turn, usage)
        else:
            rendered = render_anthropic.render_json(turn, usage, prewarm=prewarm)
        answered = Usage(
            usage.input_tokens,
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens,
            0 if prewarm else reply.output_tokens(),
        )
        return _faults(turn, rendered, render_anthropic.render_failure), answered

    return Pending(reply, finish)


Failure = Callable[[Turn, Rendered], Rendered]


def _faults(turn: Turn, rendered: Rendered, failure: Failure) -> Rendered:
    """Apply the reply's failures after a 200: an error event, then an early clean end."""
    if turn.reply.error_after is not None:
        rendered = failure(turn, rendered)
    if turn.reply.close_after is not None:
        rendered = close_after(rendered, turn.reply.close_after)
    return rendered


def count_tokens(emu: Emulator, request: RecordedRequest) -> Pending:
    """``POST /v1/messages/count_tokens``: the prompt's total, no cache involved."""
    try:
        body = _parse(request.body)
        _require(body, True, "model", "messages")
        prompt = parse_prompt(body)
    except BadRequest as exc:
        return _anthropic_bad(exc)
    except CacheControlError as exc:
        return _anthropic_bad(BadRequest(str(exc)))
    return _now(json_response(200, {"input_tokens": prompt.total_tokens}))


def _error(reply: Reply, anthropic: bool) -> Rendered:
    if anthropic:
        return anthropic_error(reply.status, reply.message, reply.error_type, reply_headers(reply))
    return openai_error(reply.status, reply.message, reply.error_type, reply_headers(reply))


def _openai(
    emu: Emulator,
    request: RecordedRequest,
    required: tuple[str, ...],
    tokens_of: Callable[[dict[str, Any]], list[str]],
    render: Callable[[dict[str, Any], Turn, int, int], Rendered],
    failure: Failure,
) -> Pending:
    """Both OpenAI endpoints: validate, pick the reply, commit the cache, render."""
    try:
        body = _parse(request.body)
        _require(body, False, *required)
    except BadRequest as exc:
        return _openai_bad(exc)
    tokens = tokens_of(body)
    reply = emu.next_reply(body, request.path, lambda: prompt_openai.latest_user_text(body))
    reply = _honour_tool_choice(body, reply)
    if reply.is_error:
        return Pending(reply, lambda: (_error(reply, False), None))
    api_key = request.api_key

    def finish() -> tuple[Rendered, Usage]:
        cached = emu.commit_openai(body, tokens, api_key)
        turn = emu.turn(str(body["model"]), reply, body)
        usage = Usage(len(tokens) - cached, cached, 0, reply.output_tokens())
        return _faults(turn, render(body, turn, len(tokens), cached), failure), usage

    return Pending(reply, finish)


def _render_chat(body: dict[str, Any], turn: Turn, prompt: int, cached: int) -> Rendered:
    if body.get("stream"):
        options = body.get("stream_options")
        usage = isinstance(options, dict) and bool(options.get("include_usage"))
        return render_chat.render_stream(turn, prompt, cached, usage)
    return render_chat.render_json(turn, prompt, cached)


def _render_responses(body: dict[str, Any], turn: Turn, prompt: int, cached: int) -> Rendered:
    if body.get("stream"):
        return render_responses.render_stream(turn, prompt, cached)
    return render_responses.render_json(turn, prompt, cached)


def chat_completions(emu: Emulator, request: RecordedRequest) -> Pending:
    """``POST /v1/chat/completions``."""
    return _openai(
        emu,
        request,
        ("model", "messages"),
        prompt_openai.chat_tokens,
        _render_chat,
        render_chat.render_failure,
    )


def responses(emu: Emulator, request: RecordedRequest) -> Pending:
    """``POST /v1/responses``."""
    return _openai(
        emu,
        request,
        ("model",),
        prompt_openai.responses_tokens,
        _render_responses,
        render_responses.render_failure,
    )


def _render_responses_stream(
    body: dict[str, Any], turn: Turn, prompt: int, cached: int
) -> Rendered:
    return render_responses.render_stream(turn, prompt, cached)


def responses_socket(emu: Emulator, request: RecordedRequest) -> Pending:
    """One ``response.create`` on a WebSocket: as ``POST /v1/responses`` streamed (the stream
    is implied there), or, with ``generate: false``, the prompt cached and nothing generated
    (no scripted reply is used)."""
    try:
        body = _parse(request.body)
        _require(body, False, "model")
    except BadRequest as exc:
        return _openai_bad(exc)
    if body.get("generate") is not False:
        return _openai(
            emu,
            request,
            ("model",),
            prompt_openai.responses_tokens,
            _render_responses_stream,
            render_responses.render_failure,
        )
    tokens = prompt_openai.responses_tokens(body)
    api_key = request.api_key

    def finish() -> tuple[Rendered, Usage]:
        cached = emu.commit_openai(body, tokens, api_key)
        turn = emu.turn(str(body["model"]), Reply(), body)
        usage = Usage(len(tokens) - cached, cached, 0, 0)
        return render_responses.render_prepared(turn, len(tokens), cached), usage

    return Pending(Reply(), finish)


def not_found(emu: Emulator, request: RecordedRequest) -> Pending:
    """Any other route: 404 in the shape of whichever protocol the caller seems to speak."""
    message = f"Not found: {request.method} {request.path}"
    if request.header("x-goog-api-key") is not None or request.path.startswith("/v1beta/"):
        return _now(gemini_error(404, message))
    if request.header("x-api-key") is not None or request.header("anthropic-version") is not None:
        return _now(anthropic_error(404, message, "not_found_error"))
    return _now(openai_error(404, message, "invalid_request_error"))

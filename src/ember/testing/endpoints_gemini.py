"""The emulator's Gemini endpoints: ``/v1beta/models/{model}:generateContent``,
``:streamGenerateContent`` (``?alt=sse``: SSE, else a JSON array) and ``:countTokens``.

A Gemini 3 model always thinks: its answers carry a ``thoughtSignature`` and, with
``Emulator.verify_thinking_signatures``, a request whose current turn sends a function call
back without its signature is refused with a 400, as the real API does.

Gemini caches implicitly: every prompt of at least ``Emulator.gemini_min_tokens`` tokens is
kept, and a later request of the same model and key whose prompt begins with it reports the
part it read as ``cachedContentTokenCount`` (``cache_model.OpenAICache``, the same automatic
prefix model, in a store of its own). The key is the caller's ``x-goog-api-key`` header or
``key`` query parameter, so two keys never read each other's entries.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ember.testing import prompt_gemini, render_gemini
from ember.testing.endpoints import Pending, Usage, _faults
from ember.testing.render_common import Rendered, json_response, reply_headers
from ember.testing.replies import Reply, default_thinking

if TYPE_CHECKING:
    from ember.testing.emulator import Emulator, RecordedRequest

_PATH = re.compile(
    r"^/(?:v1beta|v1)/models/(?P<model>[^/:]+):"
    r"(?P<method>generateContent|streamGenerateContent|countTokens)$"
)

Handler = Callable[["Emulator", "RecordedRequest"], Pending]


def route(method: str, path: str) -> Handler | None:
    """The handler of a Gemini path, or None for any other request."""
    m = _PATH.match(path)
    if method != "POST" or m is None:
        return None
    return count_tokens if m.group("method") == "countTokens" else generate


def path_model(path: str) -> tuple[str | None, bool]:
    """The model a Gemini path names (None for any other path) and whether it streams."""
    m = _PATH.match(path)
    if m is None:
        return None, False
    return m.group("model"), m.group("method") == "streamGenerateContent"


def api_key(request: RecordedRequest) -> str:
    """Google's credential: ``x-goog-api-key``, else the ``key`` query parameter."""
    header = request.header("x-goog-api-key")
    if header is not None:
        return header
    query = urllib.parse.parse_qs(request.query_string)
    return (query.get("key") or [""])[0]


def _now(rendered: Rendered) -> Pending:
    return Pending(None, lambda: (rendered, None))


def _bad(message: str) -> Pending:
    return _now(render_gemini.gemini_error(400, message))


def _parse(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise prompt_gemini.InvalidArgument(f"Invalid JSON payload received. {exc}") from None
    if not isinstance(value, dict):
        raise prompt_gemini.InvalidArgument("Invalid JSON payload received: not an object.")
    return value


def _reply(emu: Emulator, request: RecordedRequest, body: dict[str, Any]) -> Reply:
    reply = emu.next_reply(body, request.path, lambda: prompt_gemini.latest_user_text(body))
    if prompt_gemini.calls_forbidden(body) and reply.tool_calls:
        reply = reply.replace(
            tool_calls=(), text=reply.text or "No tools were allowed for this turn."
        )
    return reply


def generate(emu: Emulator, request: RecordedRequest) -> Pending:
    """``:generateContent`` and ``:streamGenerateContent``."""
    m = _PATH.match(request.path)
    assert m is not None
    model, stream = m.group("model"), m.group("method") == "streamGenerateContent"
    thinks = model.startswith("gemini-3")  # always thinking, and checking signatures
    try:
        body = _parse(request.body)
        prompt_gemini.check_request(body)
        if thinks and emu.verify_thinking_signatures:
            prompt_gemini.check_signatures(body)
    except prompt_gemini.InvalidArgument as exc:
        return _bad(str(exc))
    reply = _reply(emu, request, body)
    if reply.is_error:
        error = render_gemini.gemini_error(
            reply.status, reply.message, reply.error_type, reply_headers(reply)
        )
        return Pending(reply, lambda: (error, None))
    shown = prompt_gemini.thoughts_included(body)
    if (shown or thinks) and reply.thinking is None:
        reply = reply.replace(thinking=default_thinking(prompt_gemini.latest_user_text(body)))
    tokens = prompt_gemini.prompt_tokens(body)
    key = api_key(request)
    sse = "alt=sse" in request.query_string.split("&")

    def finish() -> tuple[Rendered, Usage]:
        cached = emu.commit_gemini(model, tokens, key)
        turn = emu.turn(model, reply, body)
        if stream:
            rendered = render_gemini.render_stream(turn, len(tokens), cached, shown, sse)
        else:
            rendered = render_gemini.render_json(turn, len(tokens), cached, shown)
        usage = Usage(len(tokens) - cached, cached, 0, reply.output_tokens())
        return _faults(turn, rendered, render_gemini.render_failure), usage

    return Pending(reply, finish)


def count_tokens(emu: Emulator, request: RecordedRequest) -> Pending:
    """``:countTokens``: ``contents`` or a whole ``generateContentRequest``; no cache."""
    try:
        body = _parse(request.body)
        inner = body.get("generateContentRequest", body.get("generate_content_request"))
        request_body = inner if isinstance(inner, dict) else body
        prompt_gemini.check_request(request_body)
    except prompt_gemini.InvalidArgument as exc:
        return _bad(str(exc))
    total = len(prompt_gemini.prompt_tokens(request_body))
    return _now(json_response(200, {"totalTokens": total}))

"""Shadow forks: a thread's last request, continued by its answer and one more question.

After a turn ends, the provider still holds the thread's prompt in its cache. A fork sends the
exact request ember last sent upstream for the thread, with only the conversation extended:
the answer it got (``replay``), a placeholder result for each tool call nobody has answered
yet, and the shadow question as a new user turn. Everything the cache keys on stays as sent,
so the fork is billed mostly as a cache read.

Invariants:
- Every byte of the recorded request outside the appended conversation is kept (``JsonDoc``
  splices): model, system / instructions, tools, tool_choice, thinking, max_tokens, metadata,
  stream and every key ember does not know. Re-serialising the request would change escapes
  or key order and turn the whole prefix into a cache write.
- One key outside the conversation may be added: a streamed Chat Completions fork asks for
  its usage (``stream_options.include_usage``), which is no part of the prompt, so that the
  fork's tokens and cost are known.
- The recorded messages are kept as JSON values; on Anthropic the last of them gains a
  ``cache_control`` breakpoint when it has none (``breakpoints.mark_prefix_end``), which is
  not part of the cached prefix's identity.
- A request that cannot be forked without changing what the cache keys on, or whose answer
  cannot be written back as the provider requires, is refused with the reason
  (:class:`ForkRefused`); the runner then takes the cold path.

Responses with ``previous_response_id``: the conversation lives on the server. The fork points
``previous_response_id`` at the recorded answer's own response (which holds the recorded input
and the answer) and sends only the placeholders and the question as ``input``. That needs the
answer to be stored, so such a request with ``store: false`` is not eligible. A request with a
``conversation`` is never forked: the shadow turn would be written into the client's stored
conversation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember.errors import EmberError, ProtocolError
from ember.protocols import ANTHROPIC, OPENAI_CHAT, gemini_parts
from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.protocols.breakpoints import caches_anything, mark_prefix_end
from ember.protocols.jsonedit import JsonDoc
from ember.protocols.openai_chat import ask_for_usage
from ember.protocols.replay import REPLAYS, Message

_PREFILL = (
    "the recorded request ends with an assistant turn (a prefill): its answer continues that "
    "turn instead of following it"
)
_FORCED = (
    "tool_choice forces a tool call, so the shadow question cannot be answered in text "
    "(and tool_choice is never changed: it is part of what the cache keys on)"
)


class ForkRefused(EmberError):
    """A hot fork is not possible for this request and answer; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"no hot fork: {reason}")


# -- eligibility of the recorded request --------------------------------------------------


def _forces_anthropic(choice: Any) -> bool:
    return isinstance(choice, dict) and choice.get("type") in ("any", "tool")


def _forces_openai(choice: Any) -> bool:
    """``required``, a named function / custom / hosted tool, or ``allowed_tools`` in
    ``required`` mode (Chat nests the mode under ``allowed_tools``, Responses does not)."""
    if choice is None or choice in ("auto", "none"):
        return False
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        inner = choice.get("allowed_tools")
        mode = choice.get("mode") or (inner.get("mode") if isinstance(inner, dict) else None)
        return mode == "required"
    return True


def _has_content(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list | str) and bool(content)


def _anthropic_eligibility(body: dict[str, Any]) -> str | None:
    """Besides the shared rules: the last message must be the user's (a prefill cannot be
    followed), and the request must use the cache at all. Without any ``cache_control`` the
    provider cached nothing, so a fork would pay the whole history as fresh input at the
    thread's own model's price: more than the cold path's light model reading a digest."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "the recorded request has no messages"
    turn = ANTHROPIC.turn_end(body)  # a system note after the ask is still the ask's turn
    last = messages[turn - 1] if turn else None
    if not isinstance(last, dict) or last.get("role") != "user":
        return _PREFILL
    if not _has_content(last):
        return "the last recorded message has no content to mark as the end of the prefix"
    if _forces_anthropic(body.get("tool_choice")):
        return _FORCED
    if not caches_anything(body):
        return "the recorded request marks no cache_control breakpoint, so nothing of it is cached"
    return None


def _chat_eligibility(body: dict[str, Any]) -> str | None:
    """Besides the shared rules: the turn must end with the user's side (a prefill cannot be
    followed). A system message after it (aider's edit-format rules) is still that turn: the
    answer and the question go after it, the prefix stays as sent."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "the recorded request has no messages"
    turn = OPENAI_CHAT.turn_end(body)
    last = messages[turn - 1] if turn else None
    if not isinstance(last, dict) or last.get("role") not in ("user", "tool", "function"):
        return _PREFILL
    if _forces_openai(body.get("tool_choice")):
        return _FORCED
    n = body.get("n")
    if isinstance(n, int) and n > 1:
        return "the recorded request asks for several choices (n > 1): each would be billed"
    return None


def _user_side(item: Any) -> bool:
    """A user message or a tool's output: what a turn of the model follows."""
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    if isinstance(kind, str) and kind.endswith("_call_output"):
        return True
    return item.get("role") == "user" and kind in (None, "message")


def _responses_eligibility(body: dict[str, Any]) -> str | None:
    if body.get("conversation") is not None:
        return "the request belongs to a stored conversation, which a fork would write into"
    if body.get("background") is True:
        return "the request ran in background mode, which answers later, by polling"
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        return "previous_response_id is not a string"
    if previous is not None and body.get("store") is False:
        return (
            "the conversation lives on the server (previous_response_id) but the request set "
            "store: false, so the answer it would continue from was not kept"
        )
    items = body.get("input")
    if previous is None and not (isinstance(items, str | list) and items):
        return "the recorded request has no input"
    if isinstance(items, list) and items and not _user_side(items[-1]):
        return _PREFILL
    if _forces_openai(body.get("tool_choice")):
        return _FORCED
    return None


def _gemini_eligibility(body: dict[str, Any]) -> str | None:
    """Gemini caches implicitly (no breakpoint to check): the conversation must end on the
    user's side, and the function calling mode must let the model answer in text (``ANY``
    forces a call)."""
    contents = gemini_parts.contents(body)
    if not contents:
        return "the recorded request has no contents"
    if gemini_parts.role(contents[-1]) not in gemini_parts.USER_ROLES:
        return _PREFILL
    config = gemini_parts.field(body, "toolConfig", "tool_config")
    calling = gemini_parts.field(config, "functionCallingConfig", "function_calling_config")
    mode = calling.get("mode") if isinstance(calling, dict) else None
    if isinstance(mode, str) and mode.upper() == "ANY":
        return _FORCED
    return None


_ELIGIBILITY: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "anthropic": _anthropic_eligibility,
    "openai_chat": _chat_eligibility,
    "openai_responses": _responses_eligibility,
    "gemini": _gemini_eligibility,
}


def fork_eligibility(adapter: ProtocolAdapter, sent_body: Any) -> str | None:
    """None when the recorded request can be forked hot, else the reason it cannot.

    Shared rules: the body is a JSON object of a known wire format; ``tool_choice`` lets the
    model answer in text; no structured output format is demanded (the shadow answers with a
    fenced JSON block in prose, which a schema-bound answer cannot hold).
    """
    if not isinstance(sent_body, dict):
        return "the recorded request is not a JSON object"
    check = _ELIGIBILITY.get(adapter.name)
    if check is None:
        return f"no fork is defined for the {adapter.name} wire format"
    if adapter.wants_structured_output(sent_body):
        return "the recorded request demands a structured output format"
    return check(sent_body)


# -- the answer -----------------------------------------------------------------------------


def answer_refusal(
    adapter: ProtocolAdapter, sent_body: Any, answer: AssembledMessage
) -> str | None:
    """None when ``answer`` can be written back after ``sent_body``, else why not.

    Only a whole answer can be: a stream cut before its terminal event may end inside a
    thinking block (no signature yet) or a tool call's input, both refused by the provider.
    """
    if answer.protocol != adapter.name:
        return f"the answer is {answer.protocol}, the request {adapter.name}"
    if answer.error is not None:
        return f"the answer failed ({answer.error.describe(120)})"
    if not answer.complete:
        return "the answer did not finish (no terminal event)"
    body = sent_body if isinstance(sent_body, dict) else {}
    if adapter.name == "openai_responses" and body.get("previous_response_id") and not answer.id:
        return "the answer has no response id to continue from"
    replay = REPLAYS.get(adapter.name)
    return replay.refusal(body, answer) if replay is not None else "unknown wire format"


# -- the fork ---------------------------------------------------------------------------------


def _append(doc: JsonDoc, key: str, messages: list[Message]) -> None:
    for message in messages:
        doc.append([key], message)


def _fork_anthropic(doc: JsonDoc, answer: AssembledMessage, question: str) -> None:
    replay = REPLAYS["anthropic"]
    mark_prefix_end(doc, ANTHROPIC.turn_end(doc.value) - 1)
    _append(doc, "messages", replay.turn(answer) + replay.tail(answer, question))


def _fork_chat(doc: JsonDoc, answer: AssembledMessage, question: str) -> None:
    """A streamed fork asks for its usage (``ask_for_usage``): the client's own request may
    not have, and a fork without usage would be recorded as 0 tokens at no known cost."""
    replay = REPLAYS["openai_chat"]
    _append(doc, "messages", replay.turn(answer) + replay.tail(answer, question))
    ask_for_usage(doc)


def _fork_responses(doc: JsonDoc, answer: AssembledMessage, question: str) -> None:
    """A string ``input`` becomes the user message it stands for (``{"role": "user",
    "content": <the string>}``, the same prompt) so that items can follow it."""
    replay = REPLAYS["openai_responses"]
    tail = replay.tail(answer, question)
    if isinstance(doc.value.get("previous_response_id"), str):
        doc.replace(["previous_response_id"], answer.id)
        doc.set_key([], "input", tail)
        return
    items = replay.turn(answer) + tail
    current = doc.value["input"]
    if isinstance(current, str):
        doc.replace(["input"], [{"role": "user", "content": current}, *items])
    else:
        _append(doc, "input", items)


def _fork_gemini(doc: JsonDoc, answer: AssembledMessage, question: str) -> None:
    """The answer as a model content, then the placeholders and the question as one user
    content; the implicit cache reads the recorded prefix as it was sent."""
    replay = REPLAYS["gemini"]
    _append(doc, "contents", replay.turn(answer) + replay.tail(answer, question))


_FORKS: dict[str, Callable[[JsonDoc, AssembledMessage, str], None]] = {
    "anthropic": _fork_anthropic,
    "openai_chat": _fork_chat,
    "openai_responses": _fork_responses,
    "gemini": _fork_gemini,
}


def fork_request(
    adapter: ProtocolAdapter, sent: bytes, answer: AssembledMessage, question: str
) -> bytes:
    """The shadow request: ``sent`` (the exact body last sent upstream for the thread) with the
    answer, placeholder results for its tool calls and ``question`` appended to the
    conversation; nothing else changes (see the module's invariants).

    Raises :class:`ForkRefused` with the reason when the request or the answer cannot be
    forked (``fork_eligibility``, ``answer_refusal``) or the question is empty.
    """
    try:
        doc = JsonDoc(sent)
    except ProtocolError as exc:
        raise ForkRefused(f"the recorded request is not JSON ({exc})") from exc
    reason = fork_eligibility(adapter, doc.value) or answer_refusal(adapter, doc.value, answer)
    if reason is None and not question.strip():
        reason = "the shadow question is empty"
    if reason is not None:
        raise ForkRefused(reason)
    _FORKS[adapter.name](doc, answer, question)
    return doc.to_bytes()

"""An answer streamed to the client as it comes, with the calls of ember's own tools held back.

A tool ember runs itself (``ember_retrieve``) must never reach the client, yet buffering the
whole answer to find out whether the model called one would take streaming away from every
request of a session (nothing on screen until the answer is whole). So the answer streams
event by event; only when an owned call *starts* is the rest of that answer held back. Ember
then runs the call, asks the provider again with its result, and streams that continuation
as more of the same answer: its opening events are dropped and its blocks (or items, or tool
call slots) are numbered on from those the client already has. The client sees one answer:
the text before the call, then the text after it; the owned call never.

One ``Splice`` per answer, per wire format:
- Anthropic: ``content_block_start`` of an owned ``tool_use`` trips it; a continuation drops
  ``message_start`` and shifts every ``index``; only the last round's ``message_delta`` and
  ``message_stop`` go out.
- OpenAI Chat: a chunk naming an owned function in ``delta.tool_calls`` trips it; a
  continuation shifts tool call ``index``es; only the last round's ``[DONE]`` goes out.
- OpenAI Responses: ``response.output_item.added`` of an owned ``function_call`` trips it; a
  continuation drops ``response.created``/``in_progress``, shifts ``output_index`` and
  ``sequence_number``, and its ``response.completed`` lists every item the client got.
- Gemini: a chunk calling an owned function trips it (its text still goes out); nothing is
  numbered, so a continuation's chunks go out as they are.

Events are relayed as the provider wrote them, except those a continuation renumbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import orjson

from ember.protocols import gemini_parts

_SEP = b"\n\n"


class Splice(Protocol):
    #: an owned call started in the current round: the rest of it is held back
    tripped: bool

    def event(self, name: str | None, data: str, raw: bytes) -> bytes | None:
        """What to send the client for one event of the current round (None: nothing)."""
        ...

    def next_round(self) -> None:
        """The held-back round was answered: what follows is its continuation."""
        ...

    def release(self) -> bytes:
        """What was held back of this round, as the provider sent it: for a round whose owned
        call is not run after all (the answer failed or broke off), so the client gets the
        provider's error or ending as it is."""
        ...


class _Held:
    """The events held back since the splice tripped."""

    tripped: bool
    held: list[bytes]

    def _hold(self, raw: bytes) -> bytes | None:
        """Keep ``raw`` back; nothing goes to the client now."""
        self.held.append(raw + _SEP)
        return None

    def release(self) -> bytes:
        out, self.held = b"".join(self.held), []
        return out


def _data(data: str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def _event(name: str | None, payload: Any) -> bytes:
    body = b"data: " + orjson.dumps(payload) + _SEP
    return (b"event: " + name.encode() + b"\n" + body) if name else body


class AnthropicSplice(_Held):
    def __init__(self, owned: Iterable[str]) -> None:
        self.owned = frozenset(owned)
        self.held = []
        self.tripped = False
        self.round = 0
        self.offset = 0  # added to this round's block indexes
        self.sent = 0  # blocks the client has, after the offset

    def event(self, name: str | None, data: str, raw: bytes) -> bytes | None:
        if self.tripped:
            return self._hold(raw)
        if name == "content_block_start" and '"tool_use"' in data:
            p = _data(data)
            block = p.get("content_block") if isinstance(p, dict) else None
            if isinstance(block, dict) and block.get("name") in self.owned:
                self.tripped = True
                return self._hold(raw)
        if self.round and name == "message_start":
            return None
        if name in ("content_block_start", "content_block_delta", "content_block_stop"):
            return self._block(name, data, raw)
        return raw + _SEP

    def _block(self, name: str, data: str, raw: bytes) -> bytes | None:
        p = _data(data)
        if not isinstance(p, dict) or not isinstance(p.get("index"), int):
            return raw + _SEP
        index = p["index"] + self.offset
        self.sent = max(self.sent, index + 1)
        if not self.offset:
            return raw + _SEP
        return _event(name, {**p, "index": index})

    def next_round(self) -> None:
        self.round += 1
        self.offset = self.sent
        self.tripped = False
        self.held = []


class ChatSplice(_Held):
    def __init__(self, owned: Iterable[str]) -> None:
        self.owned = frozenset(owned)
        self.held = []
        self.tripped = False
        self.round = 0
        self.offset = 0  # added to this round's tool call indexes
        self.sent = 0

    def event(self, name: str | None, data: str, raw: bytes) -> bytes | None:
        if self.tripped:
            return self._hold(raw)
        if data.strip() == "[DONE]" or '"tool_calls"' not in data:
            return raw + _SEP
        p = _data(data)
        calls = _chat_calls(p)
        if any(_chat_name(c) in self.owned for c in calls):
            self.tripped = True
            return self._hold(raw)
        if not calls:
            return raw + _SEP
        for c in calls:
            if isinstance(c.get("index"), int):
                c["index"] += self.offset
                self.sent = max(self.sent, c["index"] + 1)
        return _event(None, p) if self.offset else raw + _SEP

    def next_round(self) -> None:
        self.round += 1
        self.offset = self.sent
        self.tripped = False
        self.held = []


def _chat_calls(p: Any) -> list[dict[str, Any]]:
    choices = p.get("choices") if isinstance(p, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return []
    delta = choices[0].get("delta")
    calls = delta.get("tool_calls") if isinstance(delta, dict) else None
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _chat_name(call: dict[str, Any]) -> Any:
    fn = call.get("function")
    return fn.get("name") if isinstance(fn, dict) else None


class ResponsesSplice(_Held):
    _OPENING = ("response.created", "response.in_progress", "response.queued")

    def __init__(self, owned: Iterable[str]) -> None:
        self.owned = frozenset(owned)
        self.held = []
        self.response_id: str | None = None  # the client's response: every round is it
        self.tripped = False
        self.round = 0
        self.offset = 0  # added to this round's output indexes
        self.sent = 0
        self.sequence = 0  # the last sequence number the client got
        self.seq_offset = 0
        self.items: list[Any] = []  # the items the client got, whole (for the last event)

    def event(self, name: str | None, data: str, raw: bytes) -> bytes | None:
        if self.tripped:
            return self._hold(raw)
        p = _data(data)
        if not isinstance(p, dict):
            return raw + _SEP
        kind = p.get("type", name)
        if kind == "response.output_item.added":
            item = p.get("item")
            if isinstance(item, dict) and item.get("name") in self.owned:
                self.tripped = True
                return self._hold(raw)
        if self.round and kind in self._OPENING:
            return None
        if kind == "response.output_item.done" and isinstance(p.get("item"), dict):
            self.items.append(p["item"])
        changed = self._renumber(p) | self._same_response(p)
        if kind in ("response.completed", "response.incomplete") and self.round:
            response = p.get("response")
            if isinstance(response, dict):
                response["output"] = list(self.items)
                changed = True
        return _event(name, p) if changed else raw + _SEP

    def _same_response(self, p: dict[str, Any]) -> bool:
        """The first round's response id on every event (an SDK refuses a stream whose
        response changes identity midway)."""
        response = p.get("response")
        if not isinstance(response, dict):
            return False
        if self.round == 0:
            self.response_id = self.response_id or response.get("id")
            return False
        if self.response_id is not None and response.get("id") != self.response_id:
            response["id"] = self.response_id
            return True
        return False

    def _renumber(self, p: dict[str, Any]) -> bool:
        changed = False
        if isinstance(p.get("output_index"), int):
            p["output_index"] += self.offset
            self.sent = max(self.sent, p["output_index"] + 1)
            changed = bool(self.offset)
        if isinstance(p.get("sequence_number"), int):
            p["sequence_number"] += self.seq_offset
            self.sequence = max(self.sequence, p["sequence_number"])
            changed = changed or bool(self.seq_offset)
        return changed

    def next_round(self) -> None:
        self.round += 1
        self.offset = self.sent
        self.seq_offset = self.sequence + 1
        self.tripped = False
        self.held = []


class GeminiSplice(_Held):
    """Gemini's events are whole chunks with nothing to renumber: a chunk whose candidate
    calls an owned function trips the splice. Its text (what the model said before the call)
    still goes out, as a chunk of its own without the calls, the finish reason or the usage;
    the chunk itself, and the rest of the round, are held back. A continuation's chunks go
    out as they come."""

    def __init__(self, owned: Iterable[str]) -> None:
        self.owned = frozenset(owned)
        self.held = []
        self.tripped = False

    def event(self, name: str | None, data: str, raw: bytes) -> bytes | None:
        if self.tripped:
            return self._hold(raw)
        if '"functionCall"' not in data and '"function_call"' not in data:
            return raw + _SEP
        p = _data(data)
        candidate = _gemini_candidate(p)
        parts = gemini_parts.parts(candidate.get("content")) if candidate is not None else []
        calls = [gemini_parts.call_of(part) for part in parts]
        if not any(c is not None and c.get("name") in self.owned for c in calls):
            return raw + _SEP
        self.tripped = True
        held = self._hold(raw)
        said = [part for part, call in zip(parts, calls, strict=True) if call is None]
        if not said or not isinstance(p, dict) or candidate is None:
            return held
        content = {**candidate.get("content", {}), "parts": said}
        trimmed = {k: v for k, v in candidate.items() if k in ("index", "content")}
        kept = {k: v for k, v in p.items() if k in ("responseId", "modelVersion")}
        return _event(name, {"candidates": [{**trimmed, "content": content}], **kept})

    def next_round(self) -> None:
        self.tripped = False
        self.held = []


def _gemini_candidate(p: Any) -> dict[str, Any] | None:
    candidates = p.get("candidates") if isinstance(p, dict) else None
    if not isinstance(candidates, list):
        return None
    return next((c for c in candidates if isinstance(c, dict) and not c.get("index")), None)


def splice_for(protocol: str, owned: Iterable[str]) -> Splice:
    """The splice for a wire format's answers (``ValueError`` for one ember does not speak)."""
    kinds: dict[str, type[AnthropicSplice | ChatSplice | ResponsesSplice | GeminiSplice]] = {
        "anthropic": AnthropicSplice,
        "openai_chat": ChatSplice,
        "openai_responses": ResponsesSplice,
        "gemini": GeminiSplice,
    }
    if protocol not in kinds:
        raise ValueError(f"no stream splice for wire format {protocol!r}")
    return kinds[protocol](owned)

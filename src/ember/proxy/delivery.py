"""What a transport did with one exchange (pure data, shared by the relays and the flow).

Its own module so the relays (``relay.py``, ``owned.py``, ``ws_session.py``) can fill it without
importing the flow that hands it to the response stages (``flow.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ember.exchange import HiddenRound, OutcomeKind, Refusal

#: How the answer's bytes are framed: an HTTP body (SSE events when ``streamed``, else one
#: JSON document), or one JSON event per chunk (Responses over WebSocket).
Framing = Literal["http", "events"]


@dataclass
class Delivered:
    """What a transport did with one exchange: how it ended, and the bytes both ways."""

    status: int
    kind: OutcomeKind
    streamed: bool
    chunks: list[bytes] = field(default_factory=list)
    ttfb_ms: float | None = None
    error: str | None = None
    #: the exact body that went upstream for the answer the client got, as a request of its
    #: own (a WebSocket continuation: the HTTP equivalent holding the whole history)
    sent: bytes = b""
    #: ``sent`` parsed, when it is not ``Exchange.body`` (a WebSocket continuation)
    sent_value: Any = None
    hidden: list[HiddenRound] = field(default_factory=list)
    framing: Framing = "http"


def answered_refusal(refusal: Refusal, body: bytes, framing: Framing = "http") -> Delivered:
    """What ember's own answer to a refused request was: the error it sent, nothing upstream."""
    return Delivered(
        refusal.status, "refused", False, [body], error=refusal.message, framing=framing
    )

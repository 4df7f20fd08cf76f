"""How an exchange ended, judged from the answer itself as well as from the transport.

The relay sees only HTTP: a status line, bytes, and whether the connection closed cleanly. A
stream can start with 200 and then carry an ``overloaded_error`` event, or close cleanly before
its final event; by HTTP alone both look like a success. Left at that, accounting counts a
failed request as a good one (and its partial usage as a whole answer), and shaping learns
from an answer the user never got. :func:`judge` settles the outcome from what the assembled
message says, once the client already has its answer (it never changes what the client got).

The status stays the one the client saw. A 200 body or stream holding an ``overloaded_error``
used to be recorded as 529, so the accounting row said 529 where the client's log and SDK said
200, and the two could not be matched up. How it ended is ``kind``; which error the provider
reported is ``error`` (accounting keeps its type in the ``error_type`` column).
"""

from __future__ import annotations

import dataclasses
import logging

from ember.exchange import Outcome, OutcomeKind

log = logging.getLogger(__name__)

#: Outcomes an error reported inside the answer overrides: the error is why the answer ended,
#: so it wins over the connection breaking after it, or the client hanging up on it (an SDK
#: raises on an error event and closes, which the relay may see as a disconnect).
_OVERRIDDEN = ("ok", "cut", "cancelled")


def judge(outcome: Outcome) -> Outcome:
    """The outcome with the answer's own failure taken into account.

    - an error inside the answer: ``stream_error`` for a stream, ``upstream_error`` for a
      200 JSON body, with the error's type and text in ``error``;
    - a stream that ended without its terminal event, or without any event: ``cut``;
    - a 200 body that is not JSON at all: ``upstream_error``;
    - anything else unchanged.

    The status is never changed: it is the one the client saw.
    """
    msg = outcome.message
    if msg is not None and msg.error is not None and outcome.kind in _OVERRIDDEN:
        kind: OutcomeKind = "stream_error" if outcome.streamed else "upstream_error"
        log.warning(
            "provider reported %s (status %d when it can choose one) inside a %d answer",
            msg.error.type,
            msg.error.status,
            outcome.status,
        )
        return dataclasses.replace(outcome, kind=kind, error=msg.error.describe())
    if outcome.kind != "ok":
        return outcome
    if outcome.streamed and (msg is None or not msg.complete):
        log.warning("provider stream ended before its final event")
        return dataclasses.replace(
            outcome, kind="cut", error="the stream ended before its final event"
        )
    if msg is None:
        log.warning("provider answered %d with a body that is not JSON", outcome.status)
        return dataclasses.replace(outcome, kind="upstream_error", error="the answer is not JSON")
    return outcome

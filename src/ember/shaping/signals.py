"""User signals the proxy can see, detected from structure and timing (pure).

Users rarely say "shorter"; they interrupt, or they answer faster than the answer could have
been read. They do say "explain" when an answer was too thin. Three detectors, all over plain
values the stage collects (the clock is an argument):

- **interrupt** (``TOO_MUCH``): the previous request of the session was a stream the client
  cancelled, and this request carries a new user message;
- **fast skip** (``TOO_MUCH``): the previous answer was complete and handed the turn back to the
  user, and their next message arrived before even a skim of it could have finished
  (``reading_seconds``, counted from when the answer began to arrive);
- **too little** (``TOO_LITTLE``): a short new message asking for more detail after a complete
  answer, by a small fixed phrase list -- the one place wording counts, and only for this
  signal, never for how a request is shaped.

A new ask with none of them is ``NEUTRAL``; a turn that is not a new ask, or whose previous
answer is unknown or failed, is no observation at all (None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ember.shaping.controller import Signal
from ember.shaping.policy import TurnKind

#: A careful reader manages ~250 words a minute, about 5.5 tokens a second; a skim is about
#: three times that. A reply sooner than a *skim* is a skip, not a fast reader.
SKIM_TOKENS_PER_SECOND = 16.0
#: Answers shorter than this are taken in at a glance: a quick reply says nothing.
MIN_SKIP_TOKENS = 120
CHARS_PER_TOKEN = 4
#: A follow-up longer than this is a new request, not "tell me more".
MAX_FOLLOWUP_CHARS = 400

MORE_DETAIL_PHRASES: tuple[str, ...] = (
    "more detail",
    "more details",
    "elaborate",
    "explain more",
    "explain further",
    "explain why",
    "explain that",
    "explain this",
    "can you explain",
    "expand on",
    "go deeper",
    "be more specific",
    "say more",
    "walk me through",
    "too short",
    "too brief",
)
_PHRASES = re.compile(r"\b(?:" + "|".join(re.escape(p) for p in MORE_DETAIL_PHRASES) + r")\b")
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class PreviousAnswer:
    """What the stage kept of the answer to the session's previous request.

    ``outcome`` is ``Outcome.kind``; ``handed_back`` means the answer was complete and made
    no tool call (the agent now waits for its user); ``first_visible_at`` is the clock time
    its first byte reached the client.
    """

    outcome: str
    handed_back: bool
    visible_chars: int
    first_visible_at: float


def reading_seconds(visible_chars: int) -> float:
    """How long a skim of an answer of ``visible_chars`` characters takes at the least."""
    return visible_chars / CHARS_PER_TOKEN / SKIM_TOKENS_PER_SECOND


def asks_for_more(user_text: str) -> bool:
    """A short message (``<system-reminder>`` blocks a harness adds do not count) containing
    one of ``MORE_DETAIL_PHRASES``."""
    text = _SPACE.sub(" ", _REMINDER.sub("", user_text)).strip().lower()
    return 0 < len(text) <= MAX_FOLLOWUP_CHARS and _PHRASES.search(text) is not None


def fast_skip(previous: PreviousAnswer, now: float) -> bool:
    tokens = previous.visible_chars / CHARS_PER_TOKEN
    if not previous.handed_back or tokens < MIN_SKIP_TOKENS:
        return False
    return now - previous.first_visible_at < reading_seconds(previous.visible_chars)


def detect_signal(
    previous: PreviousAnswer | None, kind: TurnKind, user_text: str, now: float
) -> Signal | None:
    """The controller signal carried by this request, or None when it is no observation."""
    if kind != TurnKind.NEW_ASK or previous is None:
        return None
    if previous.outcome not in ("ok", "cancelled"):
        return None
    if asks_for_more(user_text):
        return Signal.TOO_LITTLE
    if previous.outcome == "cancelled":
        return Signal.TOO_MUCH
    if fast_skip(previous, now):
        return Signal.TOO_MUCH
    return Signal.NEUTRAL

"""When a shadow run goes, which path it takes, and when it must not (pure decisions).

Each rule is tied to what it prevents:
- a turn that ended (the agent now waits for its user) is the hottest moment: the prefix will
  not change until the user speaks;
- a session with a request in flight is never shadowed: its prefix is about to go stale;
- three failures in a row in one generation back off six hours: a provider or a prompt that
  keeps failing must not be paid for every turn (failures are charged all the same);
- what runs may spend is the project's budget (``ember.shadow.spend_share``): a share of its
  clients' spend over a window, never a per-session cap, which vetoes short sessions;
- the hot path needs a prefix of the same generation, younger than the provider's TTL, and a
  ``tool_choice`` that lets the model answer in text — anything else is the cold path, or
  nothing when no credentials are at hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.protocols.base import AssembledMessage

OFFER_BACKOFF_AFTER = 3
OFFER_BACKOFF_SECONDS = 6 * 3600.0
#: A trigger waits this long before its run starts: a user who answers at once cancels it
#: before it costs anything.
DEBOUNCE_SECONDS = 2.0

#: Stop reasons that mean the agent is done and waits for its user.
_ENDED = frozenset({"end_turn", "stop", "stop_sequence", "completed"})


def turn_ended(answer: AssembledMessage | None) -> bool:
    """The answer finished the turn: complete, no tool call pending, a final stop reason."""
    return (
        answer is not None
        and answer.complete
        and answer.error is None
        and not answer.tool_calls
        and (answer.stop_reason in _ENDED or answer.stop_reason is None)
    )


@dataclass(frozen=True)
class Backoff:
    failures: int = 0  # consecutive, in the current generation
    last_failure_at: float | None = None

    def active(self, now: float) -> bool:
        return (
            self.failures >= OFFER_BACKOFF_AFTER
            and self.last_failure_at is not None
            and now - self.last_failure_at < OFFER_BACKOFF_SECONDS
        )

    def failed(self, now: float) -> Backoff:
        return Backoff(self.failures + 1, now)


def hot_blocker(has_prefix: bool, same_generation: bool, eligibility: str | None) -> str | None:
    """Why the hot path cannot be taken (None: it can)."""
    if not has_prefix:
        return "no recorded prefix younger than the provider's cache TTL"
    if not same_generation:
        return "the recorded prefix belongs to an earlier generation"
    return eligibility

"""Pure shaping decisions: what kind of turn this is, and which effort fields may go down.

Nothing here reads a request body or edits one: the adapters turn a body into plain values
(``PartKind`` tuples, ``EffortFields``) and ``apply`` carries a plan back onto the bytes.

The three safety rules, each tied to the failure it prevents:

1. **Never create an effort field the client did not send.** A model that does not accept
   ``output_config.effort`` / ``reasoning.effort`` answers 400; lowering a value that is already
   there is always accepted, because its presence proves the model takes it
   (``lower_effort`` returns None for an absent or unknown value). The one exception is an
   OpenAI verbosity on the gpt-5 family, which is documented to take it
   (``can_create_verbosity``).
2. **Never change ``thinking.type``.** Turning thinking off while the history carries thinking
   blocks is a 400 on some models, and any thinking change misses the message cache;
   ``clamp_thinking_budget`` only ever returns a ``budget_tokens`` value.
3. **Never change the verbosity bytes between turns of a session** (``verbosity`` module and
   the stage's per-session level): a different system tail misses every cached turn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ember.protocols import ANTHROPIC, BY_NAME, OPENAI_CHAT
from ember.protocols.base import EffortFields


class TurnKind(StrEnum):
    NEW_ASK = "new_ask"
    ERROR_CONTINUATION = "error_continuation"
    MECHANICAL_CONTINUATION = "mechanical_continuation"
    UNKNOWN = "unknown"


_ASK_PARTS = frozenset({"text", "image", "document"})
_RESULT_PARTS = frozenset({"tool_result", "tool_error"})


def classify_turn(parts: Sequence[str]) -> TurnKind:
    """Classify the latest input turn by its structure only, first match wins:

    - any text, image or document part: a new ask (a person wrote something);
    - only tool results, at least one failed: an error continuation;
    - only tool results, all succeeded: a mechanical continuation;
    - nothing, or parts of unknown types: unknown.

    Content is never read: wording-dependent classification would send the same turn down
    different paths depending on phrasing, making the request path non-deterministic. Only a
    mechanical continuation gets a lower effort: an error is exactly when the model should
    think, and an unknown shape is left alone.
    """
    if any(p in _ASK_PARTS for p in parts):
        return TurnKind.NEW_ASK
    if parts and all(p in _RESULT_PARTS for p in parts):
        if "tool_error" in parts:
            return TurnKind.ERROR_CONTINUATION
        return TurnKind.MECHANICAL_CONTINUATION
    return TurnKind.UNKNOWN


def effort_rank(levels: Sequence[str]) -> Mapping[str, int]:
    """A wire format's effort values (``ProtocolAdapter.effort_levels``, lowest first) by
    rank. Each format has its own table: the scales differ at the bottom (Anthropic has no
    ``none`` or ``minimal``)."""
    return {level: i for i, level in enumerate(levels)}


#: Anthropic ``output_config.effort``, lowest first.
ANTHROPIC_EFFORT_RANK = effort_rank(ANTHROPIC.effort_levels)
#: OpenAI ``reasoning.effort`` / ``reasoning_effort``, lowest first.
OPENAI_EFFORT_RANK = effort_rank(OPENAI_CHAT.effort_levels)
VERBOSITY_RANK: Mapping[str, int] = {"low": 0, "medium": 1, "high": 2}
LEGACY_THINKING_FLOOR = 1024
MECHANICAL_VERBOSITY = "low"

_GPT5 = re.compile(r"^(?:openai/)?gpt-5(?:$|[.\-])")


def lower_effort(current: str | None, target: str, rank: Mapping[str, int]) -> str | None:
    """``target`` when it is strictly below ``current`` on ``rank``, else None (no change).

    None for an absent or unknown ``current`` value (rule 1: never create, never guess at a
    scale we do not know) and never a raise: the result is always at or below ``current``.
    """
    if current is None or current not in rank or target not in rank:
        return None
    return target if rank[target] < rank[current] else None


def clamp_thinking_budget(
    thinking_type: str | None, budget: int | None, floor: int = LEGACY_THINKING_FLOOR
) -> int | None:
    """The clamped legacy ``thinking.budget_tokens`` (``floor``), or None for no change.

    Only when ``thinking.type == "enabled"`` and the budget is above the floor; adaptive or
    disabled thinking has no budget to clamp, and the type itself is never an output (rule 2).
    """
    if thinking_type != "enabled" or budget is None or budget <= floor:
        return None
    return floor


def can_create_verbosity(model: str | None) -> bool:
    """Whether an OpenAI verbosity may be *created*: the gpt-5 family only, the models
    documented to take it (any other model may answer 400 to an unknown parameter)."""
    return bool(model and _GPT5.match(model))


def budget_clamp_allowed(kind: TurnKind, cache_cold: bool, clamp_held: bool) -> bool:
    """Whether this turn may send a clamped legacy thinking budget (when the clamp is on).

    The budget is part of the message-cache key (PROVIDER-FACTS; the emulator models it): any
    change between two requests re-writes the whole history at 1.25x instead of reading it at
    0.1x. Measured through the emulator (``bench/shaping_overhead.py``, table 3: a 30-request
    Claude Code session, budget 8000, one 6-minute idle inside a tool run), in input cost
    relative to never clamping:

    - clamp every mechanical turn (flip-flop with the asks): 1.38x -- the failure this rule
      prevents; no plausible thinking saving pays for two history re-writes per ask;
    - keep the lowered budget for the rest of the session: 1.00x, but every later *ask*
      thinks with 1024 tokens -- not a mechanical-only lever any more;
    - this rule -- start a clamp only on a mechanical turn whose cache is cold anyway (known
      to ember and idle past its TTL), hold it across the mechanical turns right after (they
      read what it wrote), send the client's budget again on the next other turn: 1.14x,
      because that next turn re-writes the history once.

    So the clamp is off unless ``EMBER_OUTPUT_THINKING_CLAMP`` is set (worth it for large
    legacy budgets with long tool runs), and when on, it follows this rule. Effort
    (``output_config.effort``) is not in the documented key and costs nothing to lower (1.00x);
    ``params_broke_cache`` guards the case where it is.
    """
    if kind != TurnKind.MECHANICAL_CONTINUATION:
        return False
    return cache_cold or clamp_held


@dataclass(frozen=True)
class EffortPlan:
    """New values for the effort fields of one request; None = leave as sent."""

    effort: str | None = None
    thinking_budget: int | None = None
    verbosity: str | None = None

    @property
    def empty(self) -> bool:
        return self.effort is None and self.thinking_budget is None and self.verbosity is None


def _effort_target(protocol: str, target: str) -> tuple[str, Mapping[str, int]]:
    """The target on the wire format's scale: a level it lacks (``minimal`` on Anthropic's)
    maps onto its lowest."""
    levels = BY_NAME[protocol].effort_levels
    rank = effort_rank(levels)
    return (target if target in rank or not levels else levels[0]), rank


def _verbosity(fields: EffortFields, model: str | None) -> str | None:
    if fields.verbosity is not None:
        return lower_effort(fields.verbosity, MECHANICAL_VERBOSITY, VERBOSITY_RANK)
    if fields.verbosity_creatable and can_create_verbosity(model):
        return MECHANICAL_VERBOSITY
    return None


def plan_effort(
    kind: TurnKind,
    fields: EffortFields,
    *,
    protocol: str,
    model: str | None,
    target: str,
    clamp_budget: bool,
) -> EffortPlan:
    """What to lower on this turn: nothing unless it is a mechanical continuation; then the
    effort to ``target`` (only if sent and higher), the legacy budget when ``clamp_budget``
    (see ``budget_clamp_allowed``), and the OpenAI verbosity to ``low``."""
    if kind != TurnKind.MECHANICAL_CONTINUATION:
        return EffortPlan()
    effort_target, rank = _effort_target(protocol, target)
    budget = None
    if clamp_budget:
        budget = clamp_thinking_budget(fields.thinking_type, fields.thinking_budget)
    return EffortPlan(
        effort=lower_effort(fields.effort, effort_target, rank),
        thinking_budget=budget,
        # a format without a verbosity parameter reports none and none creatable
        verbosity=_verbosity(fields, model),
    )


#: A read this many tokens short of what the previous request cached is a miss, not noise
#: (with a warm cache every turn reads at least what the turn before it had cached).
CACHE_MISS_TOKENS = 1024


def params_broke_cache(
    previous_cached: int, cache_read: int, params_changed: bool, within_ttl: bool
) -> bool:
    """Whether a change of effort/verbosity parameters just cost the session its cache.

    Whether ``output_config.effort`` is part of Anthropic's cache key is "reported both ways";
    the emulator and the documented invalidation list say it is not, so effort is lowered on
    mechanical turns. This guard makes that bet safe: when ember changed those parameters
    between two consecutive requests of a session, still within the cache TTL, and the second
    read ``CACHE_MISS_TOKENS`` or more short of what the first had cached (read + written),
    the parameters are evidently in the key for this model, and the stage stops routing
    effort for it. A false alarm (the client changed something else at the same moment) only
    switches routing off -- the safe direction.
    """
    if not params_changed or not within_ttl:
        return False
    return previous_cached - cache_read >= CACHE_MISS_TOKENS

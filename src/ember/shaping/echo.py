"""Echo: how much of an answer repeats what the model was just shown (pure).

Direct waste that needs no counterfactual: an answer that pastes back a file it read, or the
tool output it got, pays output price for tokens the user already has. Word ``n``-grams
(whitespace-separated, so code and prose alike) of the answer are looked up in the request's
text; the ratio is the share found.
"""

from __future__ import annotations

from typing import Any

ECHO_NGRAM = 8
#: At most this many n-grams of an answer are looked up (see ``echo_ratio``).
MAX_SAMPLED_NGRAMS = 64
#: Only the most recent context is compared (bounded work per answer; echo is of what the
#: model saw last -- the file it just read, the output it just got).
MAX_CONTEXT_CHARS = 60_000
#: Keys whose strings are identifiers or opaque data, not text a model could echo.
_SKIP_KEYS = frozenset(
    {
        "signature",
        "data",
        "encrypted_content",
        "id",
        "tool_use_id",
        "tool_call_id",
        "call_id",
        "model",
        "type",
        "role",
        "media_type",
    }
)


def context_text(body: Any, limit: int = MAX_CONTEXT_CHARS) -> str:
    """The text strings of a request body in order, keeping the last ``limit`` characters.

    Walks any JSON value (no wire format is assumed): every string except under identifier
    keys. The walk starts from the newest content and stops once ``limit`` characters are
    collected, so a long history costs no more than its recent tail.
    """
    parts: list[str] = []
    total = 0
    stack: list[Any] = [body]
    while stack and total < limit:
        value = stack.pop()  # children are pushed in order, so the newest comes out first
        if isinstance(value, str):
            parts.append(value)
            total += len(value) + 1
        elif isinstance(value, dict):
            stack.extend(v for k, v in value.items() if k not in _SKIP_KEYS)
        elif isinstance(value, list):
            stack.extend(value)
    parts.reverse()
    return "\n".join(parts)[-limit:]


def echo_ratio(answer: str, context: str, n: int = ECHO_NGRAM) -> float | None:
    """The share of the answer's distinct word ``n``-grams that occur in ``context``.

    Near 1 for an answer that pastes back what it was shown, near 0 for new text; None for an
    answer shorter than ``n`` words (nothing to measure). Bounded work: for a long answer, at
    most ``MAX_SAMPLED_NGRAMS`` n-grams spread evenly over it are looked up -- an unbiased
    estimate of the ratio, which is only ever averaged over many answers.
    """
    words = answer.split()
    if len(words) < n:
        return None
    grams = list(dict.fromkeys(" ".join(words[i : i + n]) for i in range(len(words) - n + 1)))
    if len(grams) > MAX_SAMPLED_NGRAMS:
        step = len(grams) / MAX_SAMPLED_NGRAMS
        grams = [grams[int(i * step)] for i in range(MAX_SAMPLED_NGRAMS)]
    haystack = f" {' '.join(context.split())} "
    found = sum(1 for g in grams if f" {g} " in haystack)
    return found / len(grams)

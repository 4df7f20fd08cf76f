"""A deterministic stand-in for a provider tokenizer.

Rule: a token is a run of at most four word characters (``\\w``) or a single character that is
neither a word character nor whitespace. Whitespace is free. So ``"hello, world"`` is
``hell o , worl d`` = 5 tokens, and ``"word " * 1000`` is exactly 1000 tokens, which is what
tests use to build prompts of a known size.

The numbers are only roughly like a real tokenizer's (about four characters a token on English
text); what matters is that they are stable across runs and platforms, cheap (one regular
expression pass in C), and additive over concatenation at whitespace boundaries, so cache
accounting in tests can be predicted by calling :func:`count_tokens` on the same pieces.
"""

from __future__ import annotations

import json
import re
from typing import Any

TOKEN_RE = re.compile(r"\w{1,4}|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """The tokens of ``text`` in order (see the module docstring for the rule)."""
    return TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    """How many tokens ``text`` has under the emulator's rule."""
    return len(TOKEN_RE.findall(text))


def canonical_json(value: Any) -> str:
    """Key-sorted, compact JSON: equal values always give equal strings.

    Used both as a cache identity and as the text counted for non-text blocks, so a request
    that merely reorders object keys neither misses the cache nor changes token counts.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def strip_cache_control(value: Any) -> Any:
    """``value`` with every ``cache_control`` key removed, at any depth.

    Moving a breakpoint must never change what a block *is*; otherwise adding a marker to a
    block would itself invalidate the cache entry the marker is meant to read.
    """
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


def count_json_tokens(value: Any) -> int:
    """Tokens of a non-text block: its canonical JSON with ``cache_control`` removed."""
    return count_tokens(canonical_json(strip_cache_control(value)))

"""Pure models of the providers' prompt caches: no I/O, the clock is an argument.

Both models keep one store per organisation (model + API key, and for OpenAI the
``prompt_cache_key`` too), so two tenants of the emulator never read each other's entries.
``evaluate`` both computes the usage numbers and commits the writes: an entry written by a
request is readable by the very next request, as on the real APIs once a response has begun.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ember.testing.prompt_anthropic import TTL_1H, AnthropicPrompt, parse_prompt

LOOKBACK_BLOCKS = 20
"""A read looks at the breakpoint's own block and the 19 before it, no further."""

MIN_CACHEABLE_TOKENS: dict[str, int] = {
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 2048,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-opus-5": 512,
    "claude-sonnet-5": 512,
    "claude-haiku-5": 512,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-opus-4": 1024,
    "claude-3-7-sonnet": 1024,
}
"""Minimum cacheable prefix by model-name prefix; the longest matching prefix wins."""

DEFAULT_MIN_CACHEABLE = 1024
_SWEEP_EVERY = 4096


@dataclass(frozen=True, slots=True)
class AnthropicUsage:
    """The input side of an Anthropic ``usage`` object.

    Invariant: ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` is the
    prompt's total, and ``ephemeral_5m + ephemeral_1h == cache_creation_input_tokens``.
    """

    input_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    ephemeral_5m: int = 0
    ephemeral_1h: int = 0

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def as_dict(self) -> dict[str, Any]:
        """The wire form (without ``output_tokens``)."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m,
                "ephemeral_1h_input_tokens": self.ephemeral_1h,
            },
        }


class _Entry:
    __slots__ = ("expires_at", "ttl")

    def __init__(self, expires_at: float, ttl: float) -> None:
        self.expires_at = expires_at
        self.ttl = ttl


def _sweep(store: dict[bytes, _Entry], now: float) -> None:
    for key in [k for k, e in store.items() if e.expires_at <= now]:
        del store[key]


class AnthropicCache:
    """Explicit-breakpoint prompt caching as the Messages API does it.

    Read: from each breakpoint walk back at most :data:`LOOKBACK_BLOCKS` blocks for an unexpired
    entry whose chain hash matches; the furthest match over all breakpoints is the hit, and every
    entry found is refreshed by its own TTL. Write: every breakpoint after the hit whose prefix
    reaches the model's minimum stores an entry with that breakpoint's TTL. A prefix shorter
    than the minimum is never cached and reports zero for both cache counters, without error.
    """

    def __init__(self, min_tokens: Mapping[str, int] | int | None = None) -> None:
        self._table = dict(MIN_CACHEABLE_TOKENS)
        self._flat: int | None = None
        if isinstance(min_tokens, int):
            self._flat = min_tokens
        elif min_tokens is not None:
            self._table.update(min_tokens)
        self._stores: dict[tuple[str, str], dict[bytes, _Entry]] = {}
        self._writes = 0

    def minimum(self, model: str) -> int:
        """Minimum cacheable prefix, in tokens, for ``model``."""
        if self._flat is not None:
            return self._flat
        best = ""
        for prefix in self._table:
            if model.startswith(prefix) and len(prefix) > len(best):
                best = prefix
        return self._table[best] if best else DEFAULT_MIN_CACHEABLE

    def clear(self) -> None:
        self._stores.clear()

    def evaluate(self, body: dict[str, Any], now: float, api_key: str = "") -> AnthropicUsage:
        """Usage for ``body`` at time ``now``; commits reads (refresh) and writes.

        Raises :class:`~ember.testing.prompt_anthropic.CacheControlError` before touching
        the store when the markers are invalid.
        """
        return self.commit(parse_prompt(body), now, api_key)

    def commit(self, prompt: AnthropicPrompt, now: float, api_key: str = "") -> AnthropicUsage:
        """Like :meth:`evaluate` for an already parsed prompt."""
        store = self._stores.setdefault((prompt.model, api_key), {})
        hit = self._read(store, prompt, now)
        minimum = self.minimum(prompt.model)
        cumulative = prompt.cumulative
        read = cumulative[hit] if hit >= 0 else 0
        covered = read
        short = long = 0
        for bp in prompt.breakpoints:
            if bp.index <= hit or cumulative[bp.index] < minimum:
                continue
            store[prompt.hashes[bp.index]] = _Entry(now + bp.ttl, bp.ttl)
            segment = cumulative[bp.index] - covered
            covered = cumulative[bp.index]
            if bp.ttl == TTL_1H:
                long += segment
            else:
                short += segment
            self._writes += 1
        if self._writes >= _SWEEP_EVERY:
            self._writes = 0
            _sweep(store, now)
        creation = short + long
        return AnthropicUsage(prompt.total_tokens - read - creation, creation, read, short, long)

    @staticmethod
    def _read(store: dict[bytes, _Entry], prompt: AnthropicPrompt, now: float) -> int:
        hit = -1
        for bp in prompt.breakpoints:
            for j in range(bp.index, max(0, bp.index - LOOKBACK_BLOCKS + 1) - 1, -1):
                entry = store.get(prompt.hashes[j])
                if entry is not None and entry.expires_at > now:
                    entry.expires_at = now + entry.ttl
                    hit = max(hit, j)
                    break
        return hit


class OpenAICache:
    """Automatic prefix caching as the OpenAI APIs do it.

    Prompts shorter than ``minimum`` tokens are never cached. Otherwise the prefixes ending at
    ``minimum``, ``minimum + step``, ... (up to the prompt length) are hashed; ``cached_tokens``
    is the longest of them already stored and unexpired, and every such prefix is then stored
    (or refreshed) for ``ttl`` seconds. Stores are separate per (model, ``prompt_cache_key``,
    API key).
    """

    def __init__(self, minimum: int = 1024, step: int = 128, ttl: float = 300.0) -> None:
        self.minimum = minimum
        self.step = step
        self.ttl = ttl
        self._stores: dict[tuple[str, str, str], dict[bytes, float]] = {}
        self._writes = 0

    def clear(self) -> None:
        self._stores.clear()

    def _prefix_hashes(self, tokens: Sequence[str]) -> list[bytes]:
        hasher = hashlib.blake2b(digest_size=16)
        out: list[bytes] = []
        start = 0
        for end in range(self.minimum, len(tokens) + 1, self.step):
            hasher.update("\x1f".join(tokens[start:end]).encode() + b"\x1e")
            out.append(hasher.copy().digest())
            start = end
        return out

    def evaluate(
        self,
        model: str,
        tokens: Sequence[str],
        now: float,
        cache_key: str = "",
        api_key: str = "",
    ) -> int:
        """``cached_tokens`` for a prompt of ``tokens``; commits the prompt's own prefixes."""
        if len(tokens) < self.minimum:
            return 0
        hashes = self._prefix_hashes(tokens)
        store = self._stores.setdefault((model, cache_key, api_key), {})
        cached = 0
        for i, digest in enumerate(hashes):
            expires = store.get(digest)
            if expires is not None and expires > now:
                cached = self.minimum + i * self.step
        for digest in hashes:
            store[digest] = now + self.ttl
        self._writes += len(hashes)
        if self._writes >= _SWEEP_EVERY:
            self._writes = 0
            for key in [k for k, t in store.items() if t <= now]:
                del store[key]
        return cached

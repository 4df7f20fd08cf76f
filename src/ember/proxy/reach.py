"""Whether the providers can be reached, as the last requests found (for ``/healthz``).

A provider that cannot be reached makes every request a 502/504 the client retries on its own:
Claude Code waited 100+ s in silence under ``ember wrap`` while the cause sat in the proxy's log
file. So the proxy keeps, per provider, the failure that started a run of failures (cleared by
the next answer), ``/healthz`` lists it, and ``ember wrap`` (which watches ``/healthz``) says
it on the terminal once. In memory only; never a key or a body, only the error's text.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Outcomes that mean no answer came from the provider at all.
_UNREACHED = frozenset({"unreachable", "timeout"})


@dataclass(frozen=True)
class Unreached:
    provider: str  # "anthropic" | "openai" | "gemini"
    url: str
    error: str
    since: float

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "url": self.url,
            "error": self.error,
            "since": self.since,
        }


class Reachability:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._down: dict[str, Unreached] = {}

    def record(self, provider: str, url: str, kind: str, error: str | None) -> None:
        """One exchange's outcome: no answer at all marks the provider down (keeping when it
        started), any answer — an error status included — marks it up."""
        if kind in _UNREACHED:
            if provider not in self._down:
                self._down[provider] = Unreached(provider, url, error or kind, self._clock())
        elif kind != "cancelled":
            self._down.pop(provider, None)

    def problems(self) -> list[Unreached]:
        return sorted(self._down.values(), key=lambda u: u.provider)

"""Whether a WebSocket upgrade on ``/v1/responses`` is relayed, and how it is refused.

What Codex does with the answer to its handshake (openai/codex, ``codex-rs/core/tests/suite/
websocket_fallback.rs``: ``websocket_fallback_switches_to_http_on_upgrade_required_connect`` and
``websocket_fallback_switches_to_http_after_retries_exhausted``; PR #10824 "Fallback to HTTP on
UPGRADE_REQUIRED"):

* **426 Upgrade Required** switches the whole Codex session to HTTP at once: one handshake, then
  every request is a ``POST`` (the fallback is sticky for the session).
* **Anything else** (404, a 5xx, a refused connection) is a retryable stream error: Codex
  retries the handshake ``stream_max_retries`` times with backoff before the same fallback.
  Recorded with Codex 0.171.0 against a server answering 404 (tests/fixtures/clients): 7
  handshakes over 6-7 s before the first ``POST``.

So every refusal ember decides itself is a 426. A provider whose answer is about *this* request
(a bad key, a quota, a hiccup: 401, 403, 407, 429, 5xx) has its status passed on instead: HTTP
would fail the same way, and remembering it would keep WebSocket off for other keys.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal

#: The status that makes Codex fall back to HTTP at once.
REFUSAL_STATUS = 426
#: How long a provider's refusal is remembered (seconds): clients in that window are refused at
#: once instead of each paying a failed handshake to the provider.
REMEMBER_REFUSAL_SECONDS = 600.0

Mode = Literal["auto", "on", "off"]

_ABOUT_THIS_REQUEST = frozenset({401, 403, 407, 429})


def provider_lacks_websocket(status: int) -> bool:
    """Whether a handshake answered with ``status`` means the provider does not serve
    WebSocket there (404, 405, 426...): a 4xx that is not about the caller's key or quota."""
    return 400 <= status < 500 and status not in _ABOUT_THIS_REQUEST


def refusal_reason(mode: Mode, http_only: str | None, remembered: bool) -> str | None:
    """Why ember refuses an upgrade before asking the provider, or None to ask it.

    ``http_only`` is a stage's reason to keep clients on HTTP (``Stage.http_only``: memory in
    ``tool`` mode runs the model's memory calls inside the HTTP exchange): refusing the upgrade
    sends Codex to HTTP, where that stage works.
    """
    if mode == "off":
        return "Responses over WebSocket is off in ember (openai_websocket = off); use HTTP"
    if http_only is not None:
        return f"{http_only}; use HTTP"
    if mode == "auto" and remembered:
        return "the provider does not accept Responses over WebSocket; use HTTP"
    return None


class RefusalMemo:
    """Upstream URLs whose provider recently refused a WebSocket upgrade. Thread-safe (one proxy
    may serve on several loops in tests); bounded by the number of configured URLs."""

    def __init__(
        self,
        ttl: float = REMEMBER_REFUSAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def refused(self, url: str) -> bool:
        with self._lock:
            until = self._until.get(url)
            if until is None:
                return False
            if self._clock() >= until:
                del self._until[url]
                return False
            return True

    def remember(self, url: str) -> None:
        with self._lock:
            self._until[url] = self._clock() + self.ttl

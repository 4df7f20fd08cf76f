"""The proxy's side of ``ember.hosts``: its policy, where a client puts its token, and the log
of what was refused.

Every HTTP request and every WebSocket upgrade is checked before it is routed (the dashboard
under ``/ui`` checks itself, with the same policy and stricter peers): a refused one has had no
byte of its body read, nothing forwarded, no project resolved, no memory injected and no row
written. The token travels in ``x-ember-proxy-token`` (an ``x-ember-*`` header, which
``forward_headers`` never sends upstream); on the paths ember answers itself (``/healthz``,
``/metrics``, ``/``) an ``Authorization: Bearer`` token is taken too, which is how a
Prometheus scrape config sends one. Refusals are logged at most once per ``WARN_EVERY``
seconds, with their count: a page hammering the proxy must not become a log line per request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from ember.config import Settings
from ember.hosts import POLICY_HEADERS, HostPolicy, Refused, bearer, scope_headers, shown

log = logging.getLogger(__name__)

#: The header a client on another machine sends the proxy's token in.
TOKEN_HEADER = "x-ember-proxy-token"
#: Paths the proxy answers itself, where a bearer token is the token (nothing is forwarded).
OWN_PATHS = frozenset({"/healthz", "/metrics", "/"})
#: The headers the doors read (the policy's, and where the token travels).
_READ = POLICY_HEADERS | {TOKEN_HEADER.encode(), b"authorization"}
#: At most one warning this often about refused requests.
WARN_EVERY = 10.0


def policy(settings: Settings, service: str = "this proxy") -> HostPolicy:
    """The proxy's policy: any peer on this machine; others with ``proxy_token`` only."""
    return HostPolicy(
        service=service,
        bind=settings.host,
        names=settings.allowed_hosts,
        token=settings.proxy_token,
        token_from="remote",
        token_how=(
            f"clients on other machines send the proxy_token (EMBER_PROXY_TOKEN) in {TOKEN_HEADER}"
        ),
    )


def token_of(headers: Mapping[str, str], path: str) -> str | None:
    given = headers.get(TOKEN_HEADER)
    if given is None and path in OWN_PATHS:
        given = bearer(headers.get("authorization"))
    return given


class Doors:
    """The proxy's check of each request, and its refusal log."""

    def __init__(self, settings: Settings) -> None:
        self.policy = policy(settings)
        self._counts: dict[str, int] = {}
        self._warned = float("-inf")

    def check(self, scope: Mapping[str, Any]) -> Refused | None:
        headers = scope_headers(scope, _READ)
        refused = self.policy.check(
            method=str(scope.get("method", "GET")),
            host=headers.get("host"),
            origin=headers.get("origin"),
            peer=scope.get("client"),
            token=token_of(headers, str(scope.get("path", ""))),
            upgrade=scope.get("type") == "websocket",
        )
        if refused is not None:
            self._note(refused, scope, headers)
        return refused

    def _note(self, refused: Refused, scope: Mapping[str, Any], headers: dict[str, str]) -> None:
        self._counts[refused.reason] = self._counts.get(refused.reason, 0) + 1
        now = time.monotonic()
        if now - self._warned < WARN_EVERY:
            return
        self._warned = now
        counts = ", ".join(f"{n} by {reason}" for reason, n in sorted(self._counts.items()))
        self._counts = {}
        client = scope.get("client")
        log.warning(
            "refused requests (%s); latest: %s %s from %s, Host %s, Origin %s: %s",
            counts,
            scope.get("method", "WEBSOCKET") if scope.get("type") == "http" else "WEBSOCKET",
            shown(str(scope.get("path", ""))),
            client[0] if client else "?",
            shown(headers.get("host", "")),
            shown(headers.get("origin", "-")),
            refused.message,
        )

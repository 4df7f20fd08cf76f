"""Who may use the dashboard: this machine, by a served name, and for changes, the page this
process served.

- **Doors** (``ember.hosts``, the proxy's policy with stricter peers): the ``Host`` must be a
  loopback name, the bound address or one in ``allowed_hosts`` — a page on another site that
  rebinds its own name to 127.0.0.1 (DNS rebinding) sends its own name there and gets a 421
  instead of the user's memories; a request that changes data must not come from a page of
  another origin; and the connection must come from this machine. A proxy bound to all
  interfaces keeps its dashboard to this machine, token or not: a remote client can write any
  ``Host`` header, but not its own address.
- **Token**: a route that changes data (forget, edit) needs ``x-ember-token`` equal to a
  random token made when the process started, which only the dashboard's own HTML carries. A
  page on another origin can make the browser *send* a request but cannot *read* that HTML
  (no CORS headers are ever sent), so it cannot forge one. The token is compared in constant
  time and never logged.
- **Frames**: every answer says ``frame-ancestors 'none'`` (and ``X-Frame-Options: DENY``), so
  no other page can show the dashboard in a frame and trick a click on forget.
"""

from __future__ import annotations

import secrets

from ember.config import Settings
from ember.hosts import HostPolicy, token_ok

__all__ = ["FRAME_HEADERS", "new_token", "policy", "token_ok"]

#: Headers on every dashboard answer: no page may frame it.
FRAME_HEADERS = (
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
)


def new_token() -> str:
    return secrets.token_urlsafe(32)


def policy(settings: Settings) -> HostPolicy:
    return HostPolicy(
        service="the dashboard", bind=settings.host, names=settings.allowed_hosts, remote=False
    )

"""Who may use the dashboard: the loopback, and for changes, the page this process served.

- **Host**: every request must name a loopback host (``127.0.0.1``, ``localhost``, ``[::1]``)
  in its ``Host`` header. A page on another site that rebinds its own name to 127.0.0.1 (DNS
  rebinding) sends its own name there, and gets a 403 instead of the user's memories.
- **Peer**: the connection must come from a loopback address too. A proxy bound to all
  interfaces (``host = 0.0.0.0``, warned about at start) still keeps its dashboard to this
  machine: a remote client can write any ``Host`` header, but not its own address.
- **Token**: a route that changes data (forget, edit) needs ``x-ember-token`` equal to a
  random token made when the process started, which only the dashboard's own HTML carries. A
  page on another origin can make the browser *send* a request but cannot *read* that HTML
  (no CORS headers are ever sent), so it cannot forge one. The token is compared in constant
  time and never logged.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any

_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def host_name(host_header: str) -> str:
    """``127.0.0.1`` of ``127.0.0.1:8788``, ``::1`` of ``[::1]:8788``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def loopback_host(host_header: str | None) -> bool:
    return host_header is not None and host_name(host_header) in _LOOPBACK


def loopback_peer(client: tuple[str, int] | list[Any] | None) -> bool:
    """Whether the ASGI ``client`` (address, port) is this machine; unknown: no."""
    if not client:
        return False
    address = str(client[0])
    return address in _LOOPBACK or address.startswith("127.") or address == "::ffff:127.0.0.1"


def token_ok(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())

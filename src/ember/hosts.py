"""Who may use ember's servers (the proxy, its dashboard, ``ember mcp --http``): one policy, pure.

A server on loopback is not private to its user: every web page the browser opens can make the
browser send requests to it. What closes each way in:

- **DNS rebinding.** A page at ``http://evil.example:8787`` whose name the attacker's DNS points
  at 127.0.0.1 is, to the browser, same-origin with ember: it could send the user's memories'
  project a request and read the answer. Its requests carry its own name in ``Host``. Only
  loopback names (``localhost``, ``127.x.x.x``, ``[::1]``, with or without a port), the address
  the server is bound to and the names the user configured (``allowed_hosts``) are served; any
  other ``Host`` is refused (421) before a byte of the body is read, forwarded or recorded.
- **Cross-site requests.** A page on any site can POST a "simple request" (``text/plain``, no
  preflight) to ``http://127.0.0.1:8787``: its ``Host`` is loopback, but the browser adds
  ``Origin``. A request that can change anything (every method but GET and HEAD, and every
  WebSocket upgrade) whose ``Origin`` is not a served name is refused (403). Agents and SDKs are
  not browsers and send no ``Origin``.
- **Other machines.** A peer that is not this machine is served only with the server's token
  (the proxy's ``proxy_token``); a server that has none, or that keeps to this machine (the
  dashboard), refuses it (403). ``ember mcp --http`` wants its token from every peer, this
  machine's included: any local process could otherwise list and forget memories.

Tokens are compared in constant time; no message here ever quotes one.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

#: Methods that only read (a browser's cross-site GET cannot read the answer without CORS,
#: which ember never grants). Everything else, and every WebSocket upgrade, may change state.
READ_METHODS = frozenset({"GET", "HEAD"})
#: Bind addresses that mean every interface: they name no host a client would send.
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})
#: Loopback names as clients spell them; any other spelling is parsed.
_PLAIN_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
#: The longest part of a header quoted back in a refusal (the header is the client's).
_SHOWN = 80

Reason = Literal["host", "origin", "peer", "token"]


def host_name(host_header: str) -> str:
    """The name in a ``Host`` header, lower case, without port, brackets or a final dot:
    ``127.0.0.1`` of ``127.0.0.1:8788``, ``::1`` of ``[::1]:8788``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else host
    if host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    return host.rstrip(".")


def is_loopback_name(name: str) -> bool:
    """``localhost``, any ``127.0.0.0/8`` address, ``::1`` (and 127.x mapped into IPv6); a
    name that is not an address is not taken for loopback (DNS could say anything)."""
    if name in _PLAIN_LOOPBACK:  # what clients send nearly always: no parse
        return True
    name = name.strip().strip("[]").lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def bound_name(bind: str) -> str | None:
    """The name a client may send for a server bound to ``bind``; None for a wildcard."""
    name = bind.strip().strip("[]").lower()
    return None if name in _WILDCARDS else name


def allowed_host(host_header: str | None, bind: str, configured: Iterable[str] = ()) -> bool:
    """Whether a request whose ``Host`` is ``host_header`` is for this server: a loopback
    name, the address it is bound to, or a configured name (any port). No header: no."""
    if not host_header:
        return False
    name = host_name(host_header)
    if not name:
        return False
    return (
        is_loopback_name(name)
        or name == bound_name(bind)
        or name in {host_name(c) for c in configured}
    )


def allowed_origin(origin: str | None, bind: str, configured: Iterable[str] = ()) -> bool:
    """Whether a page at ``origin`` may change things: no ``Origin`` (not a browser), or an
    ``http``/``https`` origin whose host ``allowed_host`` accepts. ``null`` (a sandboxed frame,
    a file) is a page from nowhere: no."""
    if origin is None:
        return True
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or "@" in parts.netloc:
        return False
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return False
    return allowed_host(parts.netloc, bind, configured)


def loopback_peer(client: tuple[str, int] | list[Any] | None) -> bool:
    """Whether the ASGI ``client`` (address, port) is this machine; unknown: no."""
    return bool(client) and is_loopback_name(str(client[0]))  # type: ignore[index]


def token_ok(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if authorization is None:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def shown(value: str) -> str:
    """A header's value as a refusal quotes it: at most ``_SHOWN`` characters, printable."""
    cut = value[:_SHOWN] + ("..." if len(value) > _SHOWN else "")
    return repr(cut)


def scope_headers(
    scope: Mapping[str, Any], wanted: frozenset[bytes] | None = None
) -> dict[str, str]:
    """An ASGI scope's headers (only the ``wanted`` names, lower case, when given), names in
    lower case; the last of repeated ones."""
    out = {}
    for key, value in scope.get("headers", ()):
        name = key.lower()
        if wanted is None or name in wanted:
            out[name.decode("latin-1")] = value.decode("latin-1")
    return out


#: The headers the policy reads.
POLICY_HEADERS = frozenset({b"host", b"origin"})


@dataclass(frozen=True)
class Refused:
    """Why a request is not served: its HTTP status and a message saying what to do."""

    status: int
    reason: Reason
    message: str


@dataclass(frozen=True)
class HostPolicy:
    """Who one server serves. ``service``: how messages name it ("this proxy"). ``token``:
    the token it accepts (None: none); ``token_from``: whom it is asked of ("remote": peers
    that are not this machine; "every": all). ``remote``: whether peers that are not this
    machine are served at all. ``token_how``: where a client puts the token and which setting
    holds it, for the messages."""

    service: str
    bind: str
    names: tuple[str, ...] = ()
    token: str | None = None
    token_from: Literal["remote", "every"] = "remote"
    remote: bool = True
    token_how: str = ""

    def check(
        self,
        *,
        method: str,
        host: str | None,
        origin: str | None,
        peer: tuple[str, int] | list[Any] | None,
        token: str | None,
        upgrade: bool = False,
    ) -> Refused | None:
        """None when the request may be served; else why not. The peer is looked at first
        (a machine that may not come in learns nothing else), then the token, the ``Host``
        and, for a request that may change state, the ``Origin``."""
        local = loopback_peer(peer)
        if not local:
            refused = self._remote(peer, token)
            if refused is not None:
                return refused
        elif self.token_from == "every":
            refused = self._token(token)
            if refused is not None:
                return refused
        if not allowed_host(host, self.bind, self.names):
            return Refused(421, "host", self._host_message(host))
        changes = upgrade or method.upper() not in READ_METHODS
        if changes and not allowed_origin(origin, self.bind, self.names):
            return Refused(403, "origin", self._origin_message(origin or ""))
        return None

    def check_scope(self, scope: Mapping[str, Any], token: str | None) -> Refused | None:
        """``check`` for an ASGI ``http`` or ``websocket`` scope."""
        headers = scope_headers(scope, POLICY_HEADERS)
        return self.check(
            method=str(scope.get("method", "GET")),
            host=headers.get("host"),
            origin=headers.get("origin"),
            peer=scope.get("client"),
            token=token,
            upgrade=scope.get("type") == "websocket",
        )

    def _remote(self, peer: Any, token: str | None) -> Refused | None:
        where = str(peer[0]) if peer else "an unknown address"
        if not self.remote:
            said = f"answers this machine only (the request came from {where}); open it there"
            return Refused(403, "peer", f"{self.service} {said}")
        if self.token is None:
            said = f"serves other machines only with a token (the request came from {where})"
            return Refused(403, "peer", f"{self.service} {said}: {self.token_how}")
        return self._token(token)

    def _token(self, token: str | None) -> Refused | None:
        if self.token is not None and token_ok(self.token, token):
            return None
        said = "is missing" if token is None else "does not match"
        return Refused(401, "token", f"{self.service}'s token {said}: {self.token_how}")

    def _host_message(self, host: str | None) -> str:
        if not host:
            return (
                f"the request has no Host header; {self.service} answers requests for "
                "127.0.0.1, localhost or [::1] (and the names in allowed_hosts)"
            )
        return (
            f"Host {shown(host)} is not {self.service}'s (a web page that rebinds its name "
            f"to this machine sends its own); add {shown(host_name(host))} to allowed_hosts "
            "(EMBER_ALLOWED_HOSTS) if you reach ember by that name"
        )

    def _origin_message(self, origin: str) -> str:
        return (
            f"a request from the web page at {shown(origin)} may not change anything here; "
            f"{self.service} takes such requests only from pages on loopback or on a name in "
            "allowed_hosts (EMBER_ALLOWED_HOSTS)"
        )

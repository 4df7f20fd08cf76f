"""What an exchange needs of the connection it came on: the request's bytes, and a way to
answer with ember's own error. HTTP and Responses over WebSocket implement it and differ only
in framing: a body read from HTTP messages and an error as a JSON answer in the protocol's
shape (``proxy.http_exchange``), or one socket message and an ``error`` event
(``proxy.ws_session``).

So the answers ember gives itself are written once for both: a request past ``max_body_mb``
is a 413 (``read_request``), one whose body stalls a 408, one ember cannot read a 400 and a
stage's refusal its own status (``ExchangeFlow.admit`` and ``ExchangeFlow.prepare``). One
copy per transport lets them differ: a WebSocket refusal that left its session marked busy
when the client was gone before the error went out.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ember.config import Settings
from ember.errors import RequestTooLarge
from ember.proxy import limits
from ember.proxy.delivery import Framing

log = logging.getLogger(__name__)


class Transport(Protocol):
    """One request's way in and ember's own answers' way out."""

    #: how the answer's bytes are framed (``Delivered.framing``)
    framing: Framing

    @property
    def where(self) -> str:
        """The request as the log names it (``POST /v1/messages``)."""
        ...

    async def read(self) -> bytes:
        """The request's bytes: ``RequestTooLarge`` past ``max_body_mb``, ``BodyTimedOut``
        when they come too slowly."""
        ...

    async def error(
        self,
        status: int,
        message: str,
        *,
        close: bool = False,
        retry: bool = True,
        retry_after: float | None = None,
    ) -> bytes:
        """Answer with ember's own error in the protocol's shape and return the bytes sent.
        ``close``: the connection ends after it (a body never read to its end);
        ``retry`` False: the client's SDK is told not to retry (``x-should-retry``), and
        ``retry_after`` when it may. Framings without headers send the error alone."""
        ...


async def read_request(transport: Transport, settings: Settings) -> bytes | None:
    """The request's bytes, or None once the client was told why not: 413 past
    ``max_body_mb``, 408 (and the connection closed) for a body that stalled. Each message
    names the setting that raises the limit."""
    try:
        return await transport.read()
    except RequestTooLarge:
        log.warning("refused %s: larger than max_body_mb", transport.where)
        await transport.error(413, f"ember: {limits.too_large_message(settings)}")
    except limits.BodyTimedOut as exc:
        log.warning("gave up on the body of %s: %s", transport.where, exc)
        await transport.error(408, f"ember: {limits.timed_out_message(exc)}", close=True)
    return None

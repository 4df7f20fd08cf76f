"""The final message of an exchange, assembled from the bytes that went through (the tee).

Runs after the client has its answer, so assembling never adds latency to a stream. Works on
what actually went through: a cut or cancelled stream gives a message with ``complete=False``
and whatever usage the provider had reported so far.
"""

from __future__ import annotations

import json

from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.protocols.sse import iter_events


def assemble(
    adapter: ProtocolAdapter, chunks: list[bytes], streamed: bool
) -> AssembledMessage | None:
    if not chunks:
        return None
    if streamed:
        asm = adapter.assembler()
        for ev in iter_events(chunks):
            asm.feed(ev.event, ev.data)
        return asm.result()
    try:
        body = json.loads(b"".join(chunks))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return adapter.parse_response(body)

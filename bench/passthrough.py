"""The thinnest pass-through this stack allows: the floor under ``bench/stream_floor.py``.

The proxy's own serving and upstream libraries (uvicorn with httptools and uvloop, an aiohttp
client session) and nothing of ember: the body is read, posted upstream as it came, and the
answer's chunks are written back as they arrive. No parse, no accounting, no stages. What
``ember proxy`` costs above this is ember's own code; what this costs above going direct is
the libraries' and the extra hop's.

    python bench/passthrough.py PORT UPSTREAM_URL
"""

from __future__ import annotations

import sys
from typing import Any

import aiohttp
import uvicorn

#: Request headers not forwarded: the client's host and length (aiohttp sets its own).
_DROP = (b"host", b"content-length")


class PassThrough:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/healthz":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        assert self.session is not None
        headers = {k.decode(): v.decode() for k, v in scope["headers"] if k not in _DROP}
        url = self.upstream + scope["path"]
        async with self.session.post(url, data=body, headers=headers) as r:
            kind = r.headers.get("content-type", "").encode()
            start = {"type": "http.response.start", "status": r.status}
            await send({**start, "headers": [(b"content-type", kind)]})
            async for chunk in r.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
                await send({"type": "lifespan.startup.complete"})
            else:
                if self.session is not None:
                    await self.session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: python bench/passthrough.py PORT UPSTREAM_URL")
    port, upstream = int(sys.argv[1]), sys.argv[2].rstrip("/")
    uvicorn.run(
        PassThrough(upstream),
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()

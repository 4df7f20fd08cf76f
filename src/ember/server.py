"""Running ASGI apps (the proxy, the provider emulator) under uvicorn.

Two ways: ``serve_forever`` for the ``ember proxy`` / ``ember dev upstream`` commands, and
``BackgroundServer`` for the demo, tests and benchmarks, which start a server on a free loopback
port in a thread of its own and stop it again. Both bind loopback by default: nothing here is
meant to face a network.

An app with ``settings`` (the proxy) is served with its client limits (``ember.proxy.clientguard``:
header and body timeouts, connections per client address); any other app (the provider
emulator) with uvicorn's own protocol, so a test provider never refuses the proxy's pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

import uvicorn

from ember import logs
from ember.config import Settings
from ember.proxy.clientguard import ClientLimits, guarded_protocol

log = logging.getLogger(__name__)

ASGIApp = Callable[..., Any]

# uvicorn reports a response the app deliberately left unfinished (how a proxy cuts a stream
# for its client when the provider cut it) as an error with a traceback-free message; the app
# logs the real cause itself, so this line is noise.
_CUT_MESSAGE = "ASGI callable returned without completing response."


class _DropCutStreamNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _CUT_MESSAGE


def _install_log_filter() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DropCutStreamNoise) for f in logger.filters):
        logger.addFilter(_DropCutStreamNoise())


def _loop_choice() -> str:
    try:
        import uvloop  # noqa: F401
    except ImportError:  # pragma: no cover - windows
        return "asyncio"
    return "uvloop"


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the usual small race is acceptable for tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def client_limits(app: ASGIApp) -> ClientLimits | None:
    """The client limits of an app that carries its ``Settings`` (the proxy), else None."""
    settings = getattr(app, "settings", None)
    return ClientLimits.from_settings(settings) if isinstance(settings, Settings) else None


def uvicorn_config(
    app: ASGIApp,
    host: str,
    port: int,
    log_level: str = "warning",
    backlog: int = 2048,
    limits: ClientLimits | None = None,
    own_logging: bool = False,
) -> uvicorn.Config:
    """``limits``: the client limits to enforce (None: uvicorn's own protocol, unbounded).
    ``own_logging``: the process set up its logging (``ember.logs``): uvicorn's loggers are
    left to those handlers — which mask credentials — instead of uvicorn's own, which printed
    every WebSocket handshake header, ``authorization`` included, at debug level."""
    _install_log_filter()
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop=_loop_choice(),
        http=guarded_protocol(limits) if limits is not None else "httptools",
        lifespan="on",
        access_log=False,
        log_config=None if own_logging else uvicorn.config.LOGGING_CONFIG,
        log_level=log_level,
        timeout_keep_alive=75,
        backlog=backlog,
        # Agents send large histories: HTTP bodies are unbounded in uvicorn, which is what a
        # proxy needs, and a WebSocket message (Codex sends a whole history in one) may be as
        # large as the proxy relays (ember.proxy.websocket.MAX_MESSAGE_BYTES). No compression:
        # on loopback it only costs CPU.
        ws_max_size=256 * 1024 * 1024,
        ws_per_message_deflate=False,
    )


#: Allocations between two young-generation collections while serving (Python's default: 700).
GC_YOUNG = 20_000


def quiet_collector() -> None:
    """Set the garbage collector for a server that parses a JSON body per request.

    Everything alive at start (imports, settings, the app: ~65k objects) is moved out of the
    collector's sight (``gc.freeze``), so a full collection scans only what requests left; and
    a young collection runs every ``GC_YOUNG`` allocations instead of every 700 (a 24 KB body
    alone is hundreds of containers). Request garbage is freed by reference counting as
    before; cycles are still collected, less often. Without it a full collection landed on
    one request in a hundred (a streamed answer's first event at p99 +28 ms over p50).
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, older, oldest)


def serve_forever(
    app: ASGIApp,
    host: str,
    port: int,
    log_level: str = "info",
    backlog: int = 2048,
    on_serve: Callable[[uvicorn.Server], None] | None = None,
) -> None:
    """Serve until interrupted (SIGINT/SIGTERM are handled by uvicorn). An app with an
    ``interrupted`` attribute learns through it when a second Ctrl-C asks to stop at once.
    ``on_serve`` runs on the serving loop before the server starts (``ember proxy`` installs
    ``ember wrap``'s hand-over there); setting the server's ``should_exit`` stops it. When
    the caller set up logging (``ember.logs.configure``), uvicorn's lines go through it."""
    quiet_collector()
    own = logs.configured()
    config = uvicorn_config(app, host, port, log_level, backlog, client_limits(app), own)
    server = uvicorn.Server(config)
    if hasattr(app, "interrupted"):
        app.interrupted = lambda: server.force_exit
    if hasattr(app, "stopping"):
        app.stopping = lambda: server.should_exit
    if on_serve is None:
        server.run()
        return

    async def serve() -> None:
        on_serve(server)
        await server.serve()

    # as ``server.run`` does (Python 3.11's ``asyncio.run`` takes no loop factory)
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(serve())


class BackgroundServer:
    """An ASGI app served by uvicorn in a daemon thread on loopback.

    Usage::

        with BackgroundServer(app) as srv:
            httpx.get(srv.url + "/healthz")

    ``start`` returns only once the socket accepts connections, and raises if the server failed
    to start within ``timeout`` seconds, so callers never race a half-started server.
    ``backlog`` is the listen backlog; a small one makes a provider that drops connections.
    """

    def __init__(
        self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, backlog: int = 2048
    ) -> None:
        self.app = app
        self.host = host
        self.port = port or free_port(host)
        self.backlog = backlog
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> BackgroundServer:
        config = uvicorn_config(
            self.app, self.host, self.port, backlog=self.backlog, limits=client_limits(self.app)
        )
        server = uvicorn.Server(config)
        self._server = server
        if hasattr(self.app, "stopping"):
            self.app.stopping = lambda: server.should_exit
        ready = threading.Event()

        def run() -> None:
            factory = config.get_loop_factory()
            loop = factory() if factory is not None else asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self.loop = loop
            try:
                loop.run_until_complete(server.serve())
            finally:
                with contextlib.suppress(Exception):
                    loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()
                ready.set()

        self._thread = threading.Thread(target=run, name=f"asgi:{self.port}", daemon=True)
        self._thread.start()
        waited = 0.0
        while not server.started:
            if ready.wait(0.01) or not self._thread.is_alive():
                raise RuntimeError(f"server on {self.url} failed to start")
            waited += 0.01
            if waited > timeout:
                raise RuntimeError(f"server on {self.url} did not start within {timeout}s")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

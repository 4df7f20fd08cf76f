"""A loopback TCP port in front of the test server's unix socket, that a test can close and
open again: the PostgreSQL server "down" (refused connections, live ones cut, as a server
restart does) and "back", on the same URL, without stopping the server other tests share."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator


class Relay:
    def __init__(self, server_url: str) -> None:
        parts = urllib.parse.urlsplit(server_url)
        socket_dir = urllib.parse.parse_qs(parts.query).get("host", [""])[0]
        # the local test server's unix socket, or the host and port of $EMBER_TEST_PG_URL's
        self._target: str | tuple[str, int] = (
            socket_dir.rstrip("/") + "/.s.PGSQL.5432"
            if socket_dir.startswith("/")
            else (parts.hostname or "127.0.0.1", parts.port or 5432)
        )
        self._user = urllib.parse.unquote(parts.username or "ember")
        self._database = parts.path
        self.port = 0
        self._listener: socket.socket | None = None
        self._live: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._acceptor: threading.Thread | None = None
        #: when set, the next client message holding these bytes reaches the server and then
        #: that client's connection is cut before any answer (a COMMIT whose reply is lost)
        self.cut_after: bytes | None = None
        #: with ``cut_after``: only on the connection that sent these bytes before (the
        #: COMMIT of one write, not a read's that happened to come first)
        self.cut_on: bytes | None = None
        #: with ``cut_after``: the port closes with the cut (the server gone before anyone
        #: could ask it what became of that COMMIT)
        self.close_on_cut = False
        #: while set, nothing the server says reaches a client: a server that takes the
        #: connection and never answers (stopped, frozen); connections stay up
        self.frozen = threading.Event()

    def url(self, password: str = "") -> str:
        """The database's URL through this port (a password is sent only if asked for: the
        test server trusts its local connections)."""
        auth = f"{self._user}:{password}" if password else self._user
        return f"postgresql://{auth}@127.0.0.1:{self.port}{self._database}"

    def open(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.2)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._acceptor.start()

    def close(self) -> None:
        """Refuse new connections and cut the live ones: first the live ones, at once (a
        client must not get another answer on a second connection while the port closes),
        then whatever the acceptor let in meanwhile."""
        listener, self._listener = self._listener, None  # the acceptor adds no more
        self._cut_live()
        if self._acceptor is not None and self._acceptor is not threading.current_thread():
            self._acceptor.join(5)  # its accept() holds the port until it returns
        if listener is not None:
            listener.close()
        self._cut_live()

    def _cut_live(self) -> None:
        with self._lock:
            live, self._live = self._live, set()
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            family = socket.AF_UNIX if isinstance(self._target, str) else socket.AF_INET
            server = socket.socket(family, socket.SOCK_STREAM)
            try:
                server.connect(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # closed while this one connected
                    client.close()
                    server.close()
                    return
                self._live.update((client, server))
            lost = threading.Event()  # the server's answers no longer reach this client
            threading.Thread(
                target=self._upstream, args=(client, server, lost), daemon=True
            ).start()
            threading.Thread(
                target=self._downstream, args=(server, client, lost), daemon=True
            ).start()

    def _upstream(
        self, client: socket.socket, server: socket.socket, lost: threading.Event
    ) -> None:
        """Client to server; cuts the client off right after a message holding ``cut_after``
        (whose answer it never gets: dropped from the moment the message is seen)."""
        with contextlib.suppress(OSError):
            armed = False
            while data := client.recv(65536):
                marker, on = self.cut_after, self.cut_on
                armed = armed or on is None or (on in data)
                cut = armed and marker is not None and marker in data
                if cut:
                    lost.set()
                server.sendall(data)
                if cut:
                    client.shutdown(socket.SHUT_RDWR)  # the server has it; its reply is lost
                    if self.close_on_cut:
                        self.close()  # every other connection too
                    self.cut_after = self.cut_on = None
                    break
        for sock in (client, server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _downstream(self, src: socket.socket, dst: socket.socket, lost: threading.Event) -> None:
        """Server to client; holds what the server says while ``frozen``."""
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                while self.frozen.is_set() and self._listener is not None:
                    time.sleep(0.05)
                if lost.is_set():
                    break
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def relay(server_url: str) -> Iterator[Relay]:
    r = Relay(server_url)
    r.open()
    try:
        yield r
    finally:
        r.close()

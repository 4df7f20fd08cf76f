"""Who the real proxy serves (``ember.hosts``, ``proxy/doors.py``): a request naming a foreign
``Host`` (a web page that rebound its name to 127.0.0.1), a web page's ``Origin`` on a request
that changes state, or another machine without the token is refused before anything is read,
forwarded, injected or recorded; the clients ember wraps, which name 127.0.0.1 with a port,
are served as before."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from ember.project import resolve_project
from ember.store.accounting import exchanges
from ember.store.database import Database
from ember.store.schema import PROJECT
from tests.conftest import Stack, StackFactory
from tests.memory.test_stage_e2e import ACME, FACTS, memory_blocks, memory_stage, seed, sent

EVIL = "evil.example.com"
TOKEN = "the-proxy-token-of-this-test-0123"
#: A request naming the seeded project in its prompt, as a rebinding page would send it.
ASK = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "system": f"Working directory: {ACME}",
    "messages": [{"role": "user", "content": "What is the rule for the login handler?"}],
}


def db_of(stack: Stack) -> Path:
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None
    return ref.db_path(stack.home)


def injections(db: Path) -> list[Any]:
    """The project's record of memory blocks injected into requests."""
    opened = Database(db, PROJECT, log_failures=False)
    try:
        return opened.read(lambda c: list(c.execute("SELECT * FROM memory_injections")))
    finally:
        opened.close()


def post(stack: Stack, body: Any, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    merged = {"content-type": "application/json", "anthropic-version": "2023-06-01"} | headers
    return httpx.post(stack.url + "/v1/messages", content=content, headers=merged, timeout=30)


def nothing_happened(stack: Stack) -> None:
    """The provider got no request, and the project's file no row of any kind."""
    stack.settle()
    assert stack.emulator.requests == []
    assert exchanges(db_of(stack)) == []
    assert injections(db_of(stack)) == []
    assert not (stack.home / "stats.db").exists()


@pytest.fixture
def seeded(make_stack: StackFactory) -> Stack:
    stack = make_stack(stages=memory_stage)
    seed(stack.home, ACME, FACTS)
    return stack


@pytest.mark.parametrize("stream", [False, True])
def test_a_foreign_host_gets_a_421_and_nothing_is_forwarded_injected_or_recorded(
    seeded: Stack, stream: bool
) -> None:
    r = post(seeded, {**ASK, "stream": stream}, host=f"{EVIL}:{seeded.proxy.port}")
    assert r.status_code == 421 and r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]  # Anthropic's error shape, never an event stream
    assert r.json()["type"] == "error"
    assert f"Host '{EVIL}:{seeded.proxy.port}' is not this proxy's" in error["message"]
    assert f"add '{EVIL}' to allowed_hosts" in error["message"]
    assert r.headers["x-should-retry"] == "false" and r.headers["connection"] == "close"
    assert "empty password" not in r.text
    nothing_happened(seeded)


def test_the_same_request_naming_loopback_gets_its_memories(seeded: Stack) -> None:
    """The control: what the refused request would have had."""
    r = post(seeded, ASK, host=f"127.0.0.1:{seeded.proxy.port}")
    assert r.status_code == 200
    [block] = memory_blocks(sent(seeded)[0]["messages"][0])
    assert "empty password" in block
    seeded.settle()
    assert len(injections(db_of(seeded))) == 1


def test_a_web_pages_simple_request_from_another_origin_is_refused(seeded: Stack) -> None:
    """What a page on any site can make the browser send to 127.0.0.1 with no preflight: a
    ``text/plain`` POST. Its Host is loopback; its ``Origin`` is the page's."""
    r = post(
        seeded, ASK, **{"content-type": "text/plain", "origin": f"http://{EVIL}"}
    )  # fmt: skip
    assert r.status_code == 403
    message = r.json()["error"]["message"]
    assert f"'http://{EVIL}'" in message and "allowed_hosts" in message
    nothing_happened(seeded)


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/metrics"), ("GET", "/healthz"), ("HEAD", "/"), ("GET", "/v1/models")],
)
def test_every_path_refuses_a_foreign_host(stack: Stack, method: str, path: str) -> None:
    headers = {"host": EVIL, "x-api-key": "k", "anthropic-version": "2023-06-01"}
    r = httpx.request(method, stack.url + path, headers=headers, timeout=10)
    assert r.status_code == 421
    if method != "HEAD":
        assert "is not this proxy's" in r.text and "ember_" not in r.text
    assert stack.emulator.requests == []


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "127.0.0.2", "LOCALHOST."]
)
def test_loopback_names_with_or_without_a_port_are_served(stack: Stack, host: str) -> None:
    named = host.format(port=stack.proxy.port)
    assert httpx.get(stack.url + "/healthz", headers={"host": named}).status_code == 200
    r = post(stack, {k: v for k, v in ASK.items() if k != "system"}, host=named)
    assert r.status_code == 200 and len(stack.emulator.requests) == 1
    stack.emulator.clear_requests()


def test_a_configured_name_and_its_origin_are_served(make_stack: StackFactory) -> None:
    stack = make_stack(allowed_hosts="box.lan, ember.internal")
    page = {"host": "box.lan:8787", "origin": "https://ember.internal"}
    r = post(stack, {k: v for k, v in ASK.items() if k != "system"}, **page)
    assert r.status_code == 200 and len(stack.emulator.requests) == 1
    assert httpx.get(stack.url + "/metrics", headers={"host": "ember.internal"}).status_code == 200
    assert (
        httpx.get(stack.url + "/metrics", headers={"host": "box.lan.evil.com"}).status_code == 421
    )


def test_a_read_from_another_origin_is_not_refused_by_its_origin(stack: Stack) -> None:
    """A cross-site GET cannot read the answer (ember sends no CORS headers), so only the
    methods that may change state are held to their Origin."""
    r = httpx.get(stack.url + "/healthz", headers={"origin": f"http://{EVIL}"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


# -- the WebSocket upgrade on /v1/responses -------------------------------------------------


def upgrade(stack: Stack, host: str, origin: str | None = None) -> tuple[int, bytes]:
    """A raw handshake with the given Host (a WebSocket library sets its own)."""
    lines = [
        "GET /v1/responses HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        "Authorization: Bearer sk-test",
        *([f"Origin: {origin}"] if origin else []),
    ]
    with socket.create_connection(("127.0.0.1", stack.proxy.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data and (chunk := sock.recv(65536)):
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        while length is not None and len(body) < int(length[1]) and (chunk := sock.recv(65536)):
            body += chunk
    return int(head.split()[1]), body


@pytest.mark.parametrize(
    ("host", "origin", "status", "said"),
    [
        (EVIL, None, 421, "is not this proxy's"),
        ("127.0.0.1", f"http://{EVIL}", 403, f"'http://{EVIL}'"),
    ],
)
def test_a_websocket_upgrade_from_a_web_page_is_refused_before_the_provider_is_dialled(
    stack: Stack, host: str, origin: str | None, status: int, said: str
) -> None:
    got, body = upgrade(stack, host, origin)
    assert got == status
    assert said in json.loads(body)["error"]["message"]  # OpenAI's error shape
    assert stack.emulator.requests == [] and stack.emulator.open_websockets == 0


def test_a_websocket_upgrade_naming_loopback_is_relayed(stack: Stack) -> None:
    got, _ = upgrade(stack, f"127.0.0.1:{stack.proxy.port}")
    assert got == 101
    assert [r.path for r in stack.emulator.requests] == ["/v1/responses"]


# -- other machines ---------------------------------------------------------------------------


def call_as(stack: Stack, peer: str, path: str, **headers: str) -> tuple[int, bytes]:
    """One request to the running app as a peer at ``peer`` would make it (a socket from
    another machine cannot be had on loopback), run on the proxy's own loop."""
    sent_messages: list[dict[str, Any]] = []
    body = json.dumps({k: v for k, v in ASK.items() if k != "system"}).encode()
    method = "POST" if path.startswith("/v1/") else "GET"
    raw = [(k.encode(), v.encode()) for k, v in ({"host": "127.0.0.1:8787"} | headers).items()]
    scope = {
        "type": "http", "method": method, "path": path, "raw_path": path.encode(),
        "query_string": b"", "headers": raw, "client": (peer, 50000),
        "server": ("0.0.0.0", 8787), "scheme": "http", "root_path": "", "http_version": "1.1",
    }  # fmt: skip
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if chunks:
            return chunks.pop()
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent_messages.append(message)

    assert stack.proxy.loop is not None
    asyncio.run_coroutine_threadsafe(stack.app(scope, receive, send), stack.proxy.loop).result(30)
    answer = b"".join(m.get("body", b"") for m in sent_messages if m["type"].endswith("body"))
    return int(sent_messages[0]["status"]), answer


def test_without_a_token_another_machine_is_refused_even_naming_loopback(stack: Stack) -> None:
    status, body = call_as(stack, "192.168.1.20", "/v1/messages", **{"anthropic-version": "1"})
    assert status == 403
    assert b"192.168.1.20" in body and b"EMBER_PROXY_TOKEN" in body
    assert call_as(stack, "192.168.1.20", "/healthz")[0] == 403
    assert stack.emulator.requests == []


def test_with_a_token_another_machine_must_send_it(make_stack: StackFactory) -> None:
    stack = make_stack(proxy_token=TOKEN)
    for path in ("/metrics", "/healthz", "/v1/messages"):
        status, body = call_as(stack, "10.0.0.7", path)
        assert status == 401 and b"is missing" in body and b"x-ember-proxy-token" in body
        wrong = call_as(stack, "10.0.0.7", path, **{"x-ember-proxy-token": TOKEN[:-1] + "x"})
        assert wrong[0] == 401 and b"does not match" in wrong[1] and TOKEN.encode() not in wrong[1]
    assert stack.emulator.requests == []
    assert call_as(stack, "10.0.0.7", "/metrics", authorization=f"Bearer {TOKEN}")[0] == 200
    status, _ = call_as(
        stack, "10.0.0.7", "/v1/messages", **{"x-ember-proxy-token": TOKEN, "x-api-key": "k"}
    )
    assert status == 200
    [forwarded] = stack.emulator.requests
    headers = dict(forwarded.headers)
    assert "x-ember-proxy-token" not in headers  # never leaves the machine
    assert headers["x-api-key"] == "k"
    # this machine's clients (ember wrap's) need no token
    assert call_as(stack, "127.0.0.1", "/healthz")[0] == 200


def test_a_bearer_token_is_a_key_on_forwarded_paths_not_the_proxys_token(
    make_stack: StackFactory,
) -> None:
    """On a path that is forwarded, ``Authorization`` is the client's provider key: it is not
    taken for the proxy's token, and the proxy's token is still asked for."""
    stack = make_stack(proxy_token=TOKEN)
    status, _ = call_as(stack, "10.0.0.7", "/v1/messages", authorization=f"Bearer {TOKEN}")
    assert status == 401 and stack.emulator.requests == []


def lan_address() -> str | None:
    """An address of this machine that is not loopback, if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: only the route is looked up
            address = str(s.getsockname()[0])
    except OSError:
        return None
    return None if address.startswith("127.") else address


def test_a_real_connection_from_a_lan_address_needs_the_token(tmp_path: Path) -> None:
    """The proxy bound to all interfaces, reached through this machine's LAN address: the
    peer is not loopback, as another machine's would be."""
    address = lan_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to connect from")
    from ember.compose import build_app
    from ember.config import load_settings
    from ember.server import BackgroundServer, free_port
    from ember.testing import Emulator

    with BackgroundServer(Emulator()) as upstream:
        settings = load_settings(
            env={"EMBER_HOME": str(tmp_path / "home"), "EMBER_SHADOW": "off"},
            host="0.0.0.0",
            anthropic_url=upstream.url,
            proxy_token=TOKEN,
            allowed_hosts=address,
        )
        app = build_app(settings, [])
        port = free_port()
        with BackgroundServer(app, host="0.0.0.0", port=port):
            url = f"http://{address}:{port}/healthz"
            assert httpx.get(url, timeout=10).status_code == 401
            ok = httpx.get(url, headers={"x-ember-proxy-token": TOKEN}, timeout=10)
            assert ok.status_code == 200
            local = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
            assert local.status_code == 200

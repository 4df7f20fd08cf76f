"""``ember wrap`` says, once, that the provider cannot be reached: read from the proxy's
``/healthz``, which lists what the last requests found."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest

from ember.clients.address import ProxyAddress
from ember.launch.watch import HealthWatch, upstream_lines
from ember.server import free_port
from ember.testing import Emulator
from tests.conftest import StackFactory

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`


def ask(url: str) -> int:
    body = json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()
    request = urllib.request.Request(
        url + "/v1/messages",
        data=body,
        headers={"x-api-key": "sk-test", "anthropic-version": "2023-06-01"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def health(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url + "/healthz", timeout=5) as resp:
        return dict(json.loads(resp.read()))


def test_healthz_lists_an_unreachable_provider_until_it_answers_again(
    make_stack: StackFactory,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    stack = make_stack(upstream=dead, emulator=Emulator())
    assert ask(stack.url) == 502
    stack.settle()
    [down] = health(stack.url)["upstream"]  # type: ignore[misc]
    assert down["provider"] == "anthropic" and down["url"].startswith(dead)
    assert health(stack.url)["status"] == "ok"  # the proxy serves; the provider does not


def test_the_watch_says_it_once_per_provider(make_stack: StackFactory) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    stack = make_stack(upstream=dead, emulator=Emulator())
    said: list[str] = []
    parts = urlsplit(stack.url)
    address = ProxyAddress(str(parts.hostname), int(parts.port or 0))
    with HealthWatch(address, said.append):
        for _ in range(3):  # a client retrying
            assert ask(stack.url) == 502
        deadline = time.monotonic() + 10
        while not said and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)  # a few more polls: still one line
    [line] = said
    assert "anthropic provider cannot be reached" in line and "EMBER_ANTHROPIC_URL" in line


@pytest.mark.parametrize("body", [b"", b"not json", b'{"status": "ok"}', b'{"upstream": 3}'])
def test_a_health_answer_without_an_unreachable_provider_says_nothing(body: bytes) -> None:
    assert upstream_lines(body) == {}

"""One emulator served for the whole module; every test starts from a clean emulator state."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from ember.server import BackgroundServer
from ember.testing import Emulator


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Emulator, BackgroundServer]]:
    emulator = Emulator()
    with BackgroundServer(emulator) as server:
        yield emulator, server


@pytest.fixture
def emulator(served: tuple[Emulator, BackgroundServer]) -> Emulator:
    emulator = served[0]
    emulator.clear_requests()
    emulator.clear_script()
    emulator.reset_cache()
    emulator.reply_fn = None
    emulator.latency = 0.0
    emulator.refuse_websocket = None
    return emulator


@pytest.fixture
def url(served: tuple[Emulator, BackgroundServer], emulator: Emulator) -> str:
    return served[1].url


@pytest.fixture
def claude(url: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=url, api_key="test", max_retries=0) as client:
        yield client


@pytest.fixture
def gpt(url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0) as client:
        yield client

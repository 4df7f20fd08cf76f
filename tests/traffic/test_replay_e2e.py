"""A session resumed after the proxy restarted (``ember wrap`` then ``claude --continue``) sends
its whole history again: the mistake in it was made once, and stays one sighting.

Each proxy below is a new app over the same ``EMBER_HOME`` (new storage objects, new stages),
stopped before the next one starts, as ``ember wrap`` runs them; the client is the official
``anthropic`` SDK against the emulator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.compose import build_app
from ember.config import Settings, load_settings
from ember.server import BackgroundServer
from ember.testing import Emulator
from tests.traffic.conversation import query, run_session, send, tool_round, traffic_memories

COUNTS = "SELECT key, count, saved FROM traffic_sightings ORDER BY key"


@pytest.fixture
def upstream() -> Iterator[str]:
    with BackgroundServer(Emulator()) as server:
        yield server.url


def settings(home: Path, upstream: str, **more: Any) -> Settings:
    return load_settings(
        env={"EMBER_HOME": str(home)},
        anthropic_url=upstream,
        openai_url=upstream + "/v1",
        **{"shadow": "off", **more},
    )


class Proxy:
    """One ``ember wrap`` run: a proxy of its own, drained and stopped on exit (``more``:
    settings, e.g. a ``store_url``)."""

    def __init__(self, home: Path, upstream: str, **more: Any) -> None:
        self.app = build_app(settings(home, upstream, **more))
        self.server = BackgroundServer(self.app)

    def __enter__(self) -> str:
        return self.server.__enter__().url

    def __exit__(self, *exc: object) -> None:
        assert self.server.loop is not None
        asyncio.run_coroutine_threadsafe(self.app.drain(), self.server.loop).result(30)
        self.server.__exit__(*exc)


def resumed(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the client sends when the user comes back: the history, the answer it ended
    with, and a new request."""
    return [
        *history,
        {"role": "assistant", "content": "The tests pass."},
        {"role": "user", "content": "Thanks. Summarise what you changed."},
    ]


@pytest.mark.parametrize(
    "resumed_as",
    ["aaaaaaaa-0001", "cccccccc-0003"],
    ids=["same-session-id", "new-session-id"],  # Claude Code's --continue mints a new one
)
def test_a_replayed_history_raises_no_count_and_saves_no_lesson(
    tmp_path: Path, upstream: str, resumed_as: str
) -> None:
    home = tmp_path / "home"
    with Proxy(home, upstream) as url:
        history = run_session(url, "aaaaaaaa-0001")
    before = query(home, COUNTS)
    assert [(count, saved) for _, count, saved in before] == [(1, 0), (1, 0)]

    with Proxy(home, upstream) as url:  # restarted: nothing of the first run in memory
        send(url, resumed_as, resumed(history))
    assert query(home, COUNTS) == before
    assert traffic_memories(home) == []

    # The same mistake made again, for real, is the second sighting: saved.
    again = resumed(history)
    with Proxy(home, upstream) as url:
        send(url, resumed_as, again)
        tool_round(again, "toolu-again-1", "python -m pytest -q", "python: not found", True)
        send(url, resumed_as, again)
        tool_round(again, "toolu-again-2", "python3 -m pytest -q", "12 passed in 0.4s", False)
        send(url, resumed_as, again)
    assert [(count, saved) for _, count, saved in query(home, COUNTS)] == [(2, 1), (2, 1)]
    assert sorted(m[1] for m in traffic_memories(home)) == ["environment", "error_recovery"]


def test_the_users_words_sent_again_after_a_restart_are_one_sighting(
    tmp_path: Path, upstream: str
) -> None:
    """The request the proxy was stopped in is sent again by the resumed client (under the new
    session id it was given): the instruction in it was stated once."""
    home = tmp_path / "home"
    asked = [
        {"role": "user", "content": "Fix the failing test."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Always run the linter before you commit."},
    ]
    with Proxy(home, upstream) as url:
        send(url, "aaaaaaaa-0001", asked)
    with Proxy(home, upstream) as url:
        send(url, "cccccccc-0003", asked)
    [(key, count, saved)] = query(home, COUNTS)
    assert key.startswith("preference:") and (count, saved) == (1, 0)
    assert traffic_memories(home) == []

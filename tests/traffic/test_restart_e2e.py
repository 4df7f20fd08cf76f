"""Sightings outlive the proxy: ``ember wrap`` starts a proxy per session and stops it when the
client exits, so a lesson seen once per session must still reach its second sighting.

Each session below runs through a proxy of its own (a new app, new storage objects and new
stages over the same ``EMBER_HOME``), stopped before the next one starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.config import load_settings
from ember.server import BackgroundServer
from ember.testing import Emulator
from tests.traffic.conversation import (
    CWD,
    NOT_FOUND,
    query,
    serve_sessions,
    tool_evidence,
    traffic_memories,
)

OTHER_CWD = "/home/dev/another-project"


@pytest.fixture
def upstream() -> Iterator[str]:
    with BackgroundServer(Emulator()) as server:
        yield server.url


def proxy_run(home: Path, upstream: str, *sessions: tuple[str, str, str]) -> None:
    """A proxy started for these sessions (name, working directory, what the failed call
    printed) and stopped after them, as ``ember wrap`` does."""
    settings = load_settings(
        env={"EMBER_HOME": str(home)},
        anthropic_url=upstream,
        openai_url=upstream + "/v1",
        shadow="primary",
        shadow_max_share=0.0,
    )
    serve_sessions(settings, sessions)


def session(name: str, cwd: str = CWD, failure: str = NOT_FOUND) -> tuple[str, str, str]:
    return name, cwd, failure


def recoveries(home: Path, cwd: str = CWD) -> list[tuple[str, str, str]]:
    return [m for m in traffic_memories(home, cwd) if m[1] == "error_recovery"]


def test_a_lesson_seen_once_in_each_of_two_proxies_is_saved_with_both_sessions_evidence(
    tmp_path: Path, upstream: str
) -> None:
    home = tmp_path / "home"
    proxy_run(home, upstream, session("aaaaaaaa-0001"))
    assert traffic_memories(home) == []  # seen once: not enough
    proxy_run(home, upstream, session("bbbbbbbb-0002"))  # a restart in between
    [recovery] = recoveries(home)
    assert "`python -m pytest -q` fails" in recovery[2]
    evidence = tool_evidence(home, recovery[0])
    assert [(kind, text) for kind, text, _ in evidence] == [
        ("tool_result", "12 passed in 0.4s")
    ] * 2
    assert {s for _, _, s in evidence} == {"aaaaaaaa-0001", "bbbbbbbb-0002"}


def test_a_lesson_saved_before_a_restart_is_not_saved_again(tmp_path: Path, upstream: str) -> None:
    home = tmp_path / "home"
    proxy_run(home, upstream, session("aaaaaaaa-0001"), session("bbbbbbbb-0002"))
    assert len(recoveries(home)) == 1
    before = traffic_memories(home)
    # The same lessons, the failure told in other words: the recovery's sentence quotes it, so
    # the memory store's dedup (same content) alone would save a second memory; the save
    # mark kept with the project does not let it.
    other = "bash: line 1: python: command not found"
    proxy_run(home, upstream, session("cccccccc-0003", failure=other))
    proxy_run(home, upstream, session("dddddddd-0004", failure=other))
    assert traffic_memories(home) == before
    counts = query(home, "SELECT count, saved FROM traffic_sightings ORDER BY key")
    assert counts == [(4, 1), (4, 1)]  # missing:python and the recovery, each seen 4 times


def test_sightings_in_one_project_never_count_in_another(tmp_path: Path, upstream: str) -> None:
    home = tmp_path / "home"
    proxy_run(home, upstream, session("aaaaaaaa-0001"))
    proxy_run(home, upstream, session("bbbbbbbb-0002", cwd=OTHER_CWD))
    assert traffic_memories(home) == []
    assert traffic_memories(home, OTHER_CWD) == []
    for cwd in (CWD, OTHER_CWD):
        assert query(home, "SELECT count FROM traffic_sightings", cwd=cwd) == [(1,), (1,)]

"""The pure parts of ``bench/clients_capture.py``: each client's command lines, how the
emulator's log becomes a cache-read share, and the printed row. No npm, no client, no process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench.conftest import bench_module


@pytest.fixture(scope="module")
def cc() -> Iterator[ModuleType]:
    with bench_module("clients_capture") as module:
        yield module


def test_each_client_runs_the_same_turns_and_a_session_continues(cc: ModuleType) -> None:
    by_name = {s.name: s for s in cc.SCENARIOS}
    assert len(by_name) == 8
    opencode = cc.argvs(by_name["opencode-session"])
    assert [a[:3] for a, _ in opencode] == [["run", "--model", "anthropic/claude-sonnet-4-5"]] * 2
    assert "--continue" in opencode[1][0] and " ".join(opencode[1][0]).endswith(cc.TURNS[1])
    # OpenCode reads a word that starts with "-" as an option: no prompt may hold one
    assert not any(w.startswith("-") for t in cc.TURNS for w in t.split(" "))
    [(aider, stdin)] = cc.argvs(by_name["aider-session"])  # one process, both turns typed
    assert stdin == "".join(t + "\n" for t in cc.TURNS) and "--message" not in aider
    assert cc.argvs(by_name["gemini-session"])[1][0][-4:] == [
        "--resume",
        "latest",
        "-p",
        cc.TURNS[1],
    ]


def test_the_share_is_of_the_clients_calls_only(cc: ModuleType, tmp_path: Path) -> None:
    def line(shadow: str, inp: int, read: int) -> str:
        usage = {"input_tokens": inp, "cache_read_tokens": read, "cache_write_tokens": 0}
        return json.dumps({"method": "POST", "shadow": shadow, "usage": usage})

    log = tmp_path / "log.jsonl"
    log.write_text(
        "\n".join(
            [
                line("none", 1000, 0),
                line("none", 200, 800),
                line("hot", 10, 990),  # shadow memory's call: not the client's
                json.dumps({"method": "GET", "shadow": "none", "usage": None}),
            ]
        )
    )
    share, later, calls, shadow = cc.usage_share(log)
    assert (share, later, calls, shadow) == (800 / 2000, 200, 2, 1)
    assert cc.usage_share(tmp_path / "missing.jsonl") == (None, 0, 0, 0)

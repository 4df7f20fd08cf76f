"""A one-shot through `ember wrap` whose shadow answer is slow: nothing is lost at the stop.

`ember wrap claude -- -p "…"` ends as soon as its client does; the session's one turn is then
read by shadow memory, and the provider takes 8 s to answer that read. The wrap returns the
client's status at once and says the proxy finishes the read in the background; the proxy
stores the fact, records what the read cost, and stops by itself. Its log, appended to across
wraps, says which memories were stored and, in the next one-shot, which were injected.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.project import resolve_project
from ember.server import BackgroundServer
from ember.testing import Emulator, Reply
from ember.testing.shadow import shadow_path, shadow_replies
from tests.cli.test_wrap import Agents, _wait_free
from tests.shadow.test_e2e import rows, wait_for

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

#: How long the emulated provider thinks before it answers a shadow read.
THINKS = 8.0
FACT = "Remember: releases deploy to eu-west-1 through the deploy workflow on tags."


def slow_reads(seconds: float) -> Any:
    """The model's shadow answers (the facts the user stated), each ``seconds`` late."""
    answer = shadow_replies()

    def reply(body: dict[str, Any], path: str) -> Reply | None:
        found = answer(body, path)
        if found is None or shadow_path(body) is None:
            return found
        return found.replace(delay_headers=seconds)

    return reply


@pytest.fixture
def slow_provider() -> Iterator[BackgroundServer]:
    emulator = Emulator()
    emulator.reply_fn = slow_reads(THINKS)
    with BackgroundServer(emulator) as srv:
        yield srv


def test_a_one_shot_whose_shadow_answer_takes_8_s_keeps_its_fact_and_its_cost(
    tmp_path: Path, slow_provider: BackgroundServer
) -> None:
    agents = Agents(tmp_path, slow_provider.url)
    db = _project_db(agents)
    log = Path(agents.env["EMBER_HOME"]) / "run" / f"proxy-{agents.port}.log"
    r = agents.wrap(
        "claude", "--cwd", str(agents.project), "--", "-p", "x",
        FAKE_AGENT_CALL="1", FAKE_AGENT_TEXT=FACT, FAKE_AGENT_EXIT="0",
    )  # fmt: skip
    returned = time.monotonic()
    assert r.returncode == 0, r.stderr
    assert agents.seen()["call"]["status"] == 200
    line = f"finishing 1 session's memory read in the background (up to 120 s); log: {log}"
    assert line in r.stderr
    assert "stopped the ember proxy" not in r.stderr
    # The wrap did not wait for the read: the provider is still thinking about it.
    assert not rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status = 'completed'")

    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_fact_proposals WHERE memory_id IS NOT NULL"),
             timeout=90)  # fmt: skip
    stored_after = time.monotonic() - returned
    [(status, trigger, usd)] = rows(
        db, "SELECT status, trigger, estimated_usd FROM shadow_memory_runs"
    )
    assert (status, trigger) == ("completed", "stopping") and usd > 0
    [(content, memory_id)] = rows(db, "SELECT content, memory_id FROM shadow_fact_proposals")
    assert "eu-west-1" in content
    [(cost, outcome)] = rows(db, "SELECT cost_usd, outcome FROM exchanges WHERE origin = 'shadow'")
    assert cost > 0 and outcome == "ok"  # the read's spend, apart from the session's
    assert THINKS - 1 < stored_after < 90
    _wait_free(agents)  # done reading and no wrap uses it: it stopped by itself
    assert re.search(rf"shadow: session \S+ stored 1 facts \(ids {memory_id}\)", log.read_text())
    assert content not in log.read_text()  # ids and counts, never a fact's text

    # A second one-shot a moment later: a new proxy, the same log, and the fact comes back.
    r = agents.wrap(
        "claude", "--cwd", str(agents.project), "--", "-p", "y",
        FAKE_AGENT_CALL="1", FAKE_AGENT_TEXT="Which region do releases deploy to?",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    text = log.read_text()
    assert text.count("ember wrap starts the proxy") == 2  # appended to, not overwritten
    assert re.search(rf"memory: injected ids {memory_id} into session \S+", text)
    _wait_free(agents)


def _project_db(agents: Agents) -> Path:
    ref = resolve_project({"x-ember-cwd": str(agents.project)})
    assert ref is not None
    return ref.db_path(Path(agents.env["EMBER_HOME"]))

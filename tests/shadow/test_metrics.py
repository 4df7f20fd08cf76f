"""Shadow memory's metrics through the real proxy: runs by status and path as the runs table
has them, and what its calls cost as their accounting rows say."""

from __future__ import annotations

from typing import Any

import pytest

from ember.testing.shadow import shadow_replies
from tests.conftest import StackFactory
from tests.metrics_support import scrape
from tests.shadow.test_e2e import FACT, ask, db_path, rows, wait_for


def test_runs_and_their_cost_are_what_the_tables_hold(make_stack: StackFactory) -> None:
    """No allowance: the first turn cannot pay for a run (skipped); once the session has
    spent more, the next run completes, hot. Both show in the scrape as in the table."""
    stack = make_stack(stages="features", shadow="primary", shadow_allowance_tokens=0)
    stack.emulator.reply_fn = shadow_replies()
    db = db_path(stack.home)
    session, history = "0e0e0e0e-0000-4000-8000-000000000005", []  # type: ignore[var-annotated]
    ask(stack, session, history, FACT)
    wait_for(lambda: rows(db, "SELECT status FROM shadow_memory_runs"))
    ask(stack, session, history, "Here is the whole design document. " + "word " * 40_000)
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status='completed'"))
    stack.settle()
    table: dict[tuple[str, ...], float] = {}
    for status, path in rows(db, "SELECT status, path FROM shadow_memory_runs"):
        table[(status, path)] = table.get((status, path), 0) + 1
    assert set(table) == {("skipped", "hot"), ("completed", "hot")}
    m = scrape(stack.url)
    assert m.by("ember_shadow_runs_total", "status", "path") == table
    [(cost, inputs, reads, outputs)] = rows(
        db,
        "SELECT SUM(cost_usd), SUM(input_tokens), SUM(cache_read_tokens), SUM(output_tokens) "
        "FROM exchanges WHERE origin='shadow'",
    )
    assert cost > 0
    assert m.value("ember_shadow_cost_usd_total", origin="shadow") == pytest.approx(cost)
    got: Any = [
        m.value("ember_shadow_tokens_total", kind=k, origin="shadow")
        for k in ("input", "cache_read", "output")
    ]
    assert got == [inputs, reads, outputs]
    # The shadow's calls are its own: the client's requests are the two asks.
    assert m.value("ember_requests_total") == 2

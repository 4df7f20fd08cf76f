"""``ember stats`` says where a project stands against its limits: what was spent, what
requests in flight on any proxy hold of it, and the limit — in a line per limit, and in
``--json`` as ``budget``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ember.testing import Emulator, Reply
from tests.budget.test_across_proxies import ask, project_rows
from tests.conftest import StackFactory
from tests.memory.test_stage_e2e import ACME

EMBER = str(Path(sys.executable).with_name("ember"))


def stats(home: Path, url: str | None, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {"EMBER_HOME": str(home), "EMBER_BUDGET_DAILY_USD": "0.02", "COLUMNS": "200",
            "EMBER_BUDGET_REFUSE": "true", "EMBER_BUDGET_RESERVE_USD": "0.005"}  # fmt: skip
    if url is not None:
        env["EMBER_STORE_URL"] = url
    r = subprocess.run(
        [EMBER, "stats", "--cwd", ACME, *args], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_stats_says_what_was_spent_and_what_requests_in_flight_hold(
    make_stack: StackFactory, request: pytest.FixtureRequest, backend: str
) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    emulator = Emulator()
    stack = make_stack(
        stages="features", emulator=emulator, store_url=url, budget_daily_usd=0.02,
        budget_refuse=True, budget_reserve_usd=0.005,
    )  # fmt: skip
    ask(stack.url)
    stack.settle()
    [(_, spent)] = project_rows(stack)
    emulator.script(Reply("slow", delay_headers=3.0))
    runner = threading.Thread(target=ask, args=(stack.url,))
    runner.start()
    try:
        doc: dict[str, Any] = {"budget": {"in_flight": 0}}
        for _ in range(40):
            doc = json.loads(stats(stack.home, url, "--json"))
            if doc["budget"]["in_flight"]:
                break
        text = stats(stack.home, url)
    finally:
        runner.join(10)
    budget = doc["budget"]
    assert budget["in_flight"] == 1 and budget["spent_day_usd"] == pytest.approx(spent)
    [day] = budget["limits"]
    assert (day["limit_usd"], day["reserved_usd"], day["state"]) == (0.02, 0.005, "ok")
    line = next(x for x in text.splitlines() if x.startswith("budget:"))
    assert f"${spent:.4f} spent, $0.0050 held by 1 request in flight, of the daily limit" in line
    assert "$0.0200 (budget_daily_usd)" in line

"""The dashboard's savings over a proxy that served a real session (official SDK, emulator):
"saved $X net this week" is the number ``ember stats`` nets, day by day for the plot, each part
beside it, per request in the session's view, and every empty part explained in words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ember.savings_ledger import DAY, day_of, iso_day
from ember.shaping.report import NO_BASELINE
from tests.cli.test_stats_savings import run_session, stats_json, through_ember
from tests.conftest import Stack, StackFactory
from tests.ui.test_dashboard_api import get


@pytest.fixture
def served(make_stack: StackFactory) -> Stack:
    return through_ember(make_stack, run_session)


def project_of(stack: Stack) -> str:
    [project] = [p for p in get(stack, "projects") if p["kind"] == "project"]
    return str(project["name"])


def test_the_week_is_the_net_ember_stats_reports_and_each_part_is_beside_it(
    served: Stack,
) -> None:
    savings = stats_json(served.home)["savings"]
    doc = get(served, "savings", days=7)
    week = doc["week"]
    assert week["net_usd"] == pytest.approx(savings["net_usd"], abs=1e-6) and week["net_usd"] > 0
    for part in ("compression", "memory_blocks", "retrievals", "verbosity_block"):
        assert week[part]["usd"] == pytest.approx(savings[part]["usd"], abs=1e-6), part
    assert week["compression"]["usd"] > 0 and week["retrievals"]["requests"] == 1
    # the plot: one point a day, the last one today, empty days at zero
    days = doc["days"]
    assert len(days) == 7 and days[-1]["day"] == iso_day(day_of(days[-1]["ts"]))
    assert days[-1]["net_usd"] == pytest.approx(week["net_usd"], abs=1e-6)
    assert all(d["net_usd"] == 0 for d in days[:-1])
    assert days[-1]["ts"] - days[0]["ts"] == 6 * DAY
    # why a part is empty: shaping has no baseline, nobody set a holdout
    assert "EMBER_OUTPUT_SHAPING=false" in doc["window"]["why"]["shaping"]
    only = get(served, "savings", days=7, project=project_of(served))
    assert only["week"]["net_usd"] == week["net_usd"]


def test_each_request_of_a_session_says_what_it_saved_and_they_add_up(served: Stack) -> None:
    name = project_of(served)
    [session] = get(served, "sessions", project=name)["sessions"]
    rows = get(served, "requests", project=name, session=session["session_id"])
    net = get(served, "savings")["week"]["net_usd"]
    assert all(r["savings"] is not None for r in rows)
    assert sum(r["savings"]["net_usd"] for r in rows) == pytest.approx(net, abs=1e-5)
    first, second, *_ = rows
    assert first["savings"]["parts"]["memory_blocks"] > 0  # its block, fresh on the ask
    assert second["savings"]["parts"]["compression"] > 0  # the log shortened, then replayed
    hidden = [r for r in rows if r["origin"] == "owned_tools"]
    assert hidden[0]["savings"]["parts"]["retrievals"] == pytest.approx(
        hidden[0]["cost_usd"], abs=1e-6
    )


def test_the_shaping_panel_counts_the_shaped_requests_and_says_why_nothing_is_estimated(
    served: Stack,
) -> None:
    """The panel read "shaped requests 0 / no data yet" while every request said level 2."""
    name = project_of(served)
    [session] = get(served, "sessions", project=name)["sessions"]
    rows = get(served, "requests", project=name, session=session["session_id"])
    shaped = [r for r in rows if r["notes"].get("shaping", {}).get("level") == 2]
    panel = get(served, "f/shaping/savings")
    assert panel["requests"]["treatment"] == len(shaped) > 0
    assert panel["estimated"]["available"] is False
    assert panel["estimated"]["why"] == NO_BASELINE
    assert "output_holdout" in panel["measured"]["why"]


def test_an_empty_home_explains_itself(make_stack: StackFactory) -> None:
    stack = make_stack(stages="features")
    doc = get(stack, "savings")
    assert doc["week"]["net_usd"] == 0 and len(doc["days"]) == 30
    assert "point a client at the proxy" in doc["week"]["why"]["all"]


def test_on_postgresql_the_week_is_what_stats_reads_there(
    make_stack: StackFactory, pg_url: str, tmp_path: Path
) -> None:
    stack = through_ember(make_stack, run_session, store_url=pg_url, home=tmp_path / "pg")
    assert not list(stack.home.rglob("ember.db"))
    savings: dict[str, Any] = stats_json(stack.home, store_url=pg_url)["savings"]
    week = get(stack, "savings", days=7)["week"]
    assert savings["net_usd"] > 0
    assert week["net_usd"] == pytest.approx(savings["net_usd"], abs=1e-6)

"""The overview in a real browser leads with what ember saved net this week, draws net saved per
day, names each part, explains the empty ones, and the shaping panel counts the shaped
requests instead of reading "shaped requests 0 / no data yet"."""

from __future__ import annotations

import pytest

from tests.cli.test_stats_savings import run_session, stats_json, through_ember
from tests.conftest import StackFactory
from tests.ui.test_browser import CHROMIUM, DRIVER, _missing, browser, shot, until, wait_for

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is a dev dependency")
from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = pytest.mark.skipif(CHROMIUM is None or DRIVER is None, reason=_missing())
__all__ = ["browser"]  # the fixture, used by name


def test_the_overview_leads_with_the_net_saved_this_week(
    make_stack: StackFactory, browser: webdriver.Chrome
) -> None:
    stack = through_ember(make_stack, run_session)
    net = stats_json(stack.home)["savings"]["net_usd"]
    browser.get(f"{stack.url}/ui/")
    wait_for(browser, "#net-plot rect")  # today's bar
    first = browser.find_element(By.CSS_SELECTOR, "#view > div > .panel")
    assert first.get_attribute("id") == "net-savings"  # above the spend cards and charts
    until(browser, lambda d: f"Saved ${net:.4f} net this week" in d.find_element(
        By.ID, "net-headline").text)  # fmt: skip
    panel = browser.find_element(By.ID, "net-savings").text
    for part in ("compression $", "shaping: no estimate", "memory blocks $", "retrievals $"):
        assert part in panel, part
    why = browser.find_element(By.CSS_SELECTOR, '#net-savings li[data-part="shaping"]').text
    assert "EMBER_OUTPUT_SHAPING=false" in why and "output_holdout" in why
    counts = browser.find_element(By.ID, "shaping-counts").text
    assert counts.startswith("7 shaped requests")
    assert "no data yet" not in browser.find_element(By.ID, "savings").text
    shot(browser, "8-net-savings")

"""The dashboard in a real browser (Debian's chromium + chromium-driver, driven by selenium):
every view is clicked through on a proxy that served real SDK traffic, a memory is forgotten
from the page and the database checked. Screenshots are kept in ``$EMBER_TEST_ARTIFACTS``
(default ``build/test-artifacts/ui``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ember.store.database import Database
from ember.store.schema import PROJECT
from tests.conftest import Stack, StackFactory
from tests.memory.test_stage_e2e import ACME, FACTS, run_agent, seed

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is a dev dependency")
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
ARTIFACTS = Path(os.environ.get("EMBER_TEST_ARTIFACTS", "build/test-artifacts")) / "ui"


def _missing() -> str:
    gone = [name for name, at in (("chromium", CHROMIUM), ("chromedriver", DRIVER)) if not at]
    return (
        f"no {' and no '.join(gone)} on PATH: `make test` installs Debian's chromium and "
        "chromium-driver with apt-get only as root or with passwordless sudo "
        "(scripts/test-deps); install them yourself to run the browser tests"
    )


pytestmark = pytest.mark.skipif(CHROMIUM is None or DRIVER is None, reason=_missing())


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--no-proxy-server",
    ):
        options.add_argument(arg)
    service = webdriver.ChromeService(executable_path=str(DRIVER))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: webdriver.Chrome, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def wait_for(driver: webdriver.Chrome, css: str, timeout: float = 20) -> object:
    try:
        return WebDriverWait(driver, timeout).until(
            ec.presence_of_element_located((By.CSS_SELECTOR, css))
        )
    except TimeoutException:
        shot(driver, "failed")
        problem = driver.find_element(By.ID, "error").get_attribute("textContent")
        logs = [e["message"] for e in driver.get_log("browser")]
        raise AssertionError(
            f"{css} never appeared; page error: {problem!r}; console: {logs}"
        ) from None


def until(driver: webdriver.Chrome, check: Callable[[webdriver.Chrome], bool]) -> None:
    """Wait for ``check``; the page redraws a view as a whole, so an element read before a
    redraw is stale: looked up again on the next try."""
    WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(check)


def click_tab(driver: webdriver.Chrome, view: str) -> None:
    driver.find_element(By.CSS_SELECTOR, f'#tabs button[data-view="{view}"]').click()


def rendered(driver: webdriver.Chrome, view: str) -> None:
    WebDriverWait(driver, 20).until(
        lambda d: d.find_element(By.ID, "view").get_attribute("data-rendered") == view
    )


def memory_ids(stack: Stack) -> list[str]:
    stack.app.storage.flush(10)
    [path] = list((stack.home / "projects").glob("*/ember.db"))
    db = Database(path, PROJECT, log_failures=False)
    try:
        return db.read(lambda c: [r[0] for r in c.execute("SELECT id FROM memories")])
    finally:
        db.close()


def test_every_view_and_forgetting_a_memory_in_a_real_browser(
    make_stack: StackFactory, browser: webdriver.Chrome
) -> None:
    stack = make_stack(stages="features")
    ids = seed(stack.home, ACME, FACTS)
    run_agent(stack)
    browser.get(f"{stack.url}/ui/")
    wait_for(browser, "#spend-chart svg rect")  # bars drawn from the accounting rows
    until(browser, lambda d: "requests" in d.find_element(By.CSS_SELECTOR, ".cards").text)
    shot(browser, "1-spend")

    click_tab(browser, "sessions")
    rendered(browser, "sessions")
    browser.find_element(By.CSS_SELECTOR, "#view tbody tr.click").click()  # the project
    wait_for(browser, "#sessions tbody tr.click").click()  # its one session
    wait_for(browser, "#requests details.injection")
    rows = browser.find_elements(By.CSS_SELECTOR, "#requests tbody tr")
    assert len(rows) == 3
    injection = browser.find_element(By.CSS_SELECTOR, "#requests details.injection")
    injection.click()
    assert "READ-ONLY" in injection.text and ids[0] in injection.text
    shot(browser, "2-requests")

    click_tab(browser, "memory")
    rendered(browser, "memory")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#memories tbody tr")) == len(FACTS)
    assert f"1–{len(FACTS)} of {len(FACTS)}" in browser.find_element(By.ID, "memories-pager").text
    box = browser.find_element(By.ID, "memory-search")
    box.send_keys("empty password login\n")
    until(browser, lambda d: "matching" in d.find_element(By.CSS_SELECTOR, "#memories h2").text)
    first = browser.find_element(By.CSS_SELECTOR, "#memories tbody tr")
    assert "empty password" in first.text and "injectable" in first.text
    shot(browser, "3-search")
    first.click()
    wait_for(browser, "#memory-forget")
    shot(browser, "4-memory")
    browser.find_element(By.ID, "memory-forget").click()
    WebDriverWait(browser, 10).until(ec.alert_is_present()).accept()
    wait_for(browser, "#memories")
    WebDriverWait(browser, 20).until(lambda d: ids[0] not in memory_ids(stack))
    assert set(ids[1:]) <= set(memory_ids(stack))

    click_tab(browser, "shadow")
    rendered(browser, "shadow")
    assert browser.find_element(By.ID, "shadow-runs")
    assert browser.find_element(By.ID, "shadow-compare")
    shot(browser, "5-shadow")
    click_tab(browser, "traffic")
    rendered(browser, "traffic")
    assert "pytest" in browser.find_element(By.ID, "lessons").text
    click_tab(browser, "learn")
    rendered(browser, "learn")
    assert browser.find_element(By.ID, "toin").find_elements(By.CSS_SELECTOR, "tbody tr")
    shot(browser, "7-learned")
    click_tab(browser, "spend")
    rendered(browser, "spend")
    # the spend view redraws when the live feed ticks: read the budget card afresh each try
    until(browser, lambda d: "No limit for this project" in d.find_element(By.ID, "budget").text)
    errors = browser.find_element(By.ID, "error")
    assert not errors.is_displayed(), errors.text


def test_a_new_request_shows_up_without_reloading(
    make_stack: StackFactory, browser: webdriver.Chrome
) -> None:
    stack = make_stack(stages="features")
    run_agent(stack)
    browser.get(f"{stack.url}/ui/")
    wait_for(browser, "#live.on")
    card = lambda: browser.find_element(By.CSS_SELECTOR, ".cards").text  # noqa: E731
    assert "\n3\nrequests" in "\n" + card() or "3\nrequests" in card()
    run_agent(stack)
    until(browser, lambda d: "6\nrequests" in card())
    shot(browser, "6-live")


def test_a_memory_and_the_requests_it_went_into_link_to_each_other(
    make_stack: StackFactory, browser: webdriver.Chrome
) -> None:
    """From a request's injected block to each memory's page, which counts the requests it
    went into and whether their answers cited it, and back to the session."""
    stack = make_stack(stages="features")
    ids = seed(stack.home, ACME, FACTS)
    run_agent(stack)
    browser.get(f"{stack.url}/ui/")
    wait_for(browser, "#spend-chart")
    click_tab(browser, "sessions")
    rendered(browser, "sessions")
    browser.find_element(By.CSS_SELECTOR, "#view tbody tr.click").click()
    wait_for(browser, "#sessions tbody tr.click").click()
    wait_for(browser, "#requests details.injection").click()
    link = browser.find_element(By.CSS_SELECTOR, f'#requests a.memory-link[data-memory="{ids[0]}"]')
    assert "cited" in (link.get_attribute("class") or "")  # the answers name the fix
    link.click()
    rendered(browser, "memory")
    wait_for(browser, "#memory-requests")
    counts = browser.find_element(By.CSS_SELECTOR, "#memory-requests .counts").text
    assert counts.startswith("Injected into 1 request, cited in 1")
    [row] = browser.find_elements(By.CSS_SELECTOR, "#memory-requests tbody tr")
    assert "0a1b2c3d-0000-4000" in row.text and "cited" in row.text
    shot(browser, "8-memory-requests")
    row.click()
    rendered(browser, "sessions")
    wait_for(browser, "#requests details.injection")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#requests tbody tr")) == 3
    errors = browser.find_element(By.ID, "error")
    assert not errors.is_displayed(), errors.text


def test_the_page_draws_an_empty_home(make_stack: StackFactory, browser: webdriver.Chrome) -> None:
    """No request, no memory yet: every card says so, and no view fails."""
    stack = make_stack(stages="features")
    browser.get(f"{stack.url}/ui/")
    wait_for(browser, "#spend-chart svg")
    until(browser, lambda d: "$0.0000\nspend" in d.find_element(By.CSS_SELECTOR, ".cards").text)
    click_tab(browser, "sessions")
    rendered(browser, "sessions")
    assert browser.find_element(By.CSS_SELECTOR, "#view .panel h2").text == "Projects"
    shot(browser, "9-empty")
    errors = browser.find_element(By.ID, "error")
    assert not errors.is_displayed(), errors.text


def test_sessions_past_one_page_are_paged_with_their_total(
    make_stack: StackFactory, browser: webdriver.Chrome
) -> None:
    """205 sessions: the first page says 1–200 of 205, the next holds the 5 oldest."""
    from tests.ui.test_paging import SESSIONS, record_sessions

    stack = make_stack(stages="features")
    record_sessions(stack, SESSIONS)
    browser.get(f"{stack.url}/ui/")
    wait_for(browser, "#spend-chart")
    click_tab(browser, "sessions")
    rendered(browser, "sessions")
    browser.find_element(By.CSS_SELECTOR, "#view tbody tr.click").click()  # the project
    wait_for(browser, "#sessions-pager")
    pager = lambda: browser.find_element(By.ID, "sessions-pager").text  # noqa: E731
    until(browser, lambda d: "1–200 of 205" in pager())
    assert len(browser.find_elements(By.CSS_SELECTOR, "#sessions tbody tr")) == 200
    assert not browser.find_element(By.ID, "sessions-pager-prev").is_enabled()
    browser.find_element(By.ID, "sessions-pager-next").click()
    until(browser, lambda d: "201–205 of 205" in pager())
    rows = browser.find_elements(By.CSS_SELECTOR, "#sessions tbody tr")
    assert len(rows) == 5 and "session-000" in rows[-1].text
    assert not browser.find_element(By.ID, "sessions-pager-next").is_enabled()
    shot(browser, "10-sessions-page-2")
    browser.find_element(By.ID, "sessions-pager-prev").click()
    until(browser, lambda d: "1–200 of 205" in pager())
    errors = browser.find_element(By.ID, "error")
    assert not errors.is_displayed(), errors.text

"""DNS rebinding and cross-site requests through a real browser (Debian's chromium and
chromium-driver, driven by selenium as the dashboard's tests are), all on loopback.

Chromium resolves ``evil.test`` to 127.0.0.1 (``--host-resolver-rules``), as a rebinding
attacker's DNS would once the page is loaded. The page comes from a stand-in for the attacker's
server on a port; that server goes away and the proxy takes the same port, so the page's
script now reaches ember *same-origin*, free to read the answer. It POSTs a ``text/plain``
"simple request" (no preflight) naming a project that has memories. The proxy refuses it on
its ``Host``, the page reads the refusal, and the provider never hears of it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.compose import build_app
from ember.config import load_settings
from ember.server import BackgroundServer, free_port
from ember.testing import Emulator
from tests.memory.test_stage_e2e import ACME, FACTS, memory_stage, seed

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is a dev dependency")
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="chromium and chromium-driver are not installed (make test installs them with "
    "apt-get where it can: scripts/test-deps)",
)

ASK = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "system": f"Working directory: {ACME}",
    "messages": [{"role": "user", "content": "What is the rule for the login handler?"}],
}
#: The attacker's page: once started (``attempt()``), POST the ask to ``target`` until something
#: answers, then show the status and what the page could read. (A real one polls until its
#: name points at the victim; the test starts it once it does.)
PAGE = """<!doctype html><title>evil</title><pre id="out"></pre><script>
const target = new URLSearchParams(location.search).get("target");
const mode = new URLSearchParams(location.search).get("mode") || "cors";
async function attempt() {
  try {
    const r = await fetch(target, {method: "POST", mode: mode,
      headers: {"content-type": "text/plain"}, body: BODY});
    document.getElementById("out").textContent = await r.text();
    document.body.dataset.status = String(r.status);
  } catch (e) { setTimeout(attempt, 200); }
}
</script>"""


def page_app(html: str) -> Any:
    body = html.encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"content-type", b"text/html"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


@pytest.fixture
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-proxy-server",
        "--host-resolver-rules=MAP evil.test 127.0.0.1",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(
        options=options, service=webdriver.ChromeService(executable_path=str(DRIVER))
    )
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def emulator() -> Iterator[tuple[Emulator, str]]:
    emu = Emulator()
    with BackgroundServer(emu) as upstream:
        yield emu, upstream.url


def proxy_on(port: int, home: Path, upstream: str) -> BackgroundServer:
    settings = load_settings(
        env={"EMBER_HOME": str(home), "EMBER_SHADOW": "off"},
        anthropic_url=upstream,
        openai_url=upstream + "/v1",
    )
    return BackgroundServer(build_app(settings, memory_stage), port=port)


def shown_status(driver: Any, timeout: float = 30) -> str:
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.body.dataset.status") is not None
    )
    return str(driver.execute_script("return document.body.dataset.status"))


def html() -> str:
    return PAGE.replace("BODY", json.dumps(json.dumps(ASK)))


def test_a_rebound_page_reaching_the_proxy_same_origin_is_refused_by_its_host(
    browser: Any, emulator: tuple[Emulator, str], tmp_path: Path
) -> None:
    emu, upstream = emulator
    seed(tmp_path / "home", ACME, FACTS)
    port = free_port()
    with BackgroundServer(page_app(html()), port=port):
        browser.get(f"http://evil.test:{port}/?target=/v1/messages")
    # the attacker's server is gone: the page's own origin is now the proxy
    with proxy_on(port, tmp_path / "home", upstream):
        browser.execute_script("attempt()")
        status = shown_status(browser)
        read = browser.find_element("id", "out").text
    assert status == "421"
    assert f"Host 'evil.test:{port}' is not this proxy's" in read
    assert "empty password" not in read
    assert emu.requests == []


def test_a_page_on_another_site_cannot_post_to_the_proxy_on_loopback(
    browser: Any, emulator: tuple[Emulator, str], tmp_path: Path
) -> None:
    """No rebinding: the page posts across origins to http://127.0.0.1. Its Host is loopback,
    its Origin the page's. (A page may not read a cross-site answer, so it sends ``no-cors``;
    the browser sends the request all the same.)"""
    emu, upstream = emulator
    seed(tmp_path / "home", ACME, FACTS)
    with proxy_on(free_port(), tmp_path / "home", upstream) as proxy:
        target = f"{proxy.url}/v1/messages"
        with BackgroundServer(page_app(html())) as page:
            browser.get(f"http://evil.test:{page.port}/?mode=no-cors&target={target}")
            browser.execute_script("attempt()")
            assert shown_status(browser) == "0"  # the opaque answer: it was sent, and answered
            # the same page on a loopback name is this machine's: served
            browser.get(f"http://127.0.0.1:{page.port}/?mode=no-cors&target={target}")
            browser.execute_script("attempt()")
            assert shown_status(browser) == "0"
            WebDriverWait(browser, 30).until(lambda _: len(emu.requests) == 1)
    [served] = emu.requests
    assert dict(served.headers)["origin"] == f"http://127.0.0.1:{page.port}"

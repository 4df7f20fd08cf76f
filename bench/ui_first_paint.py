"""The dashboard on a year of data: how long the first paint takes (issue #22: <= 1 s).

Builds a home as a heavy user's year leaves it — ``--requests`` accounting rows (100,000)
over ``--projects`` projects and 365 days, sessions of ~40 requests, four models, ember's own
calls beside the clients', and ``--memories`` memories (20,000, embedded by the shipped model)
in the busiest project — then serves ``ember ui``'s app on loopback and measures, side by side:

- each JSON call the first paint makes, cold (the server's first) and warm (again, nothing new);
- the page in a real browser (Debian's chromium, when installed): from navigation to the spend
  view drawn (``#view[data-rendered=spend]``), cold and reloaded; and the memories view of the
  20,000-memory project.

    python bench/ui_first_paint.py [--requests 100000] [--memories 20000] [--projects 10]
        [--keep DIR]   (build the home once into DIR and reuse it)
        [--cold]       (no warm-up: the page opened the instant the server starts)

Loopback only; every loop is bounded by the counts above.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

from ember.compose import spec
from ember.config import load_settings
from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory, NewMemory
from ember.project import resolve_project
from ember.protocols.base import Usage
from ember.server import BackgroundServer
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.registry import storage_for
from ember.store.schema import PROJECT
from ember.ui.app import Dashboard

MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5", "gpt-5-mini")
DAY = 86_400.0


def build(home: Path, requests: int, memories: int, projects: int) -> None:
    rng = random.Random(7)
    now = time.time()
    weights = [1.0 / (i + 1) for i in range(projects)]  # the first project is the busiest
    share = [w / sum(weights) for w in weights]
    for p in range(projects):
        ref = resolve_project({"x-ember-cwd": f"/home/bench/project-{p}"})
        assert ref is not None
        n = int(requests * share[p])
        db = Database(ref.db_path(home), PROJECT, log_failures=False)
        try:
            rows = [_row(rng, now, ref.identity, i) for i in range(n)]
            for start in range(0, n, 5000):
                batch = rows[start : start + 5000]
                db.write(lambda c, b=batch: [r.insert(c) for r in b])
        finally:
            db.close()
        if p == 0 and memories:
            _memories(ref.db_path(home), memories, rng)
        print(f"  project {p}: {n:,} requests", flush=True)


def _row(rng: random.Random, now: float, project: str, i: int) -> ExchangeRecord:
    ts = now - rng.random() * 365 * DAY
    model = rng.choice(MODELS)
    origin = "shadow" if rng.random() < 0.05 else "client"
    inp, read, out = rng.randint(50, 3000), rng.randint(0, 80_000), rng.randint(20, 2000)
    return ExchangeRecord(
        ts=ts,
        session_id=f"s-{project[-6:]}-{i // 40}",
        project=project,
        protocol="anthropic" if model.startswith("claude") else "openai_responses",
        model=model,
        status=200,
        outcome="ok",
        stream=True,
        usage=Usage(input_tokens=inp, cache_read_tokens=read, output_tokens=out),
        usage_estimated=False,
        cost_usd=(inp * 3 + read * 0.3 + out * 15) / 1e6,
        price_snapshot="bench",
        latency_ms=rng.uniform(300, 9000),
        ttfb_ms=rng.uniform(100, 900),
        thread=None,
        thread_kind="main",
        origin=origin,
    )


def _memories(path: Path, n: int, rng: random.Random) -> None:
    topics = ["tests", "deploy", "auth", "database", "style", "ci", "api", "docs", "build"]
    verbs = ["must", "should never", "always", "prefers to", "runs", "keeps"]
    started = time.perf_counter()
    with HierarchicalMemory(path, get_embedder()) as store:
        for start in range(0, n, 500):
            batch = [
                NewMemory(
                    f"The {rng.choice(topics)} code {rng.choice(verbs)} use option {i} of "
                    f"module m{i % 997} ({rng.choice(topics)}, case {i}).",
                    importance=rng.uniform(0.2, 0.9),
                )
                for i in range(start, min(n, start + 500))
            ]
            store.add_many(batch, dedup=False)
    print(f"  {n:,} memories embedded in {time.perf_counter() - started:.0f} s", flush=True)


def api_times(url: str, project: str) -> list[tuple[str, float, float]]:
    calls = [
        ("features", {}),
        ("projects", {}),
        ("spend", {"days": 30, "by": "origin"}),
        ("spend", {"days": 365, "by": "model"}),
        ("sessions", {"project": project}),
        ("f/memory/memories", {"project": project}),
    ]
    out = []
    with httpx.Client(timeout=120) as client:
        for path, params in calls:
            timed = []
            for _ in range(2):
                t = time.perf_counter()
                r = client.get(f"{url}/ui/api/{path}", params=params)
                r.raise_for_status()
                timed.append((time.perf_counter() - t) * 1000)
            label = path + (
                "?" + ",".join(f"{k}={v}" for k, v in params.items() if k != "project")
                if params
                else ""
            )
            out.append((label, timed[0], timed[1]))
    return out


def browser_times(url: str, project: str) -> list[tuple[str, float]] | str:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        return "chromium / chromedriver not installed (scripts/test-deps)"
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    b = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))
    out: list[tuple[str, float]] = []
    try:
        for label in ("spend view, first load", "spend view, reload"):
            b.get(f"{url}/ui/")
            out.append((label, _drawn(b, "spend")))
        t0 = b.execute_script(
            f"state.project = {project!r}; state.view = 'memory'; const t = performance.now();"
            "render(); return t;"
        )
        out.append(("memories view (20k-memory project)", _drawn(b, "memory") - float(t0)))
    finally:
        b.quit()
    return out


def _drawn(driver: Any, view: str) -> float:
    """When the page drew ``view`` (its own ``window.emberDrawn``: ms since navigation)."""
    from selenium.webdriver.support.ui import WebDriverWait

    script = "const d = window.emberDrawn; return d && d.view === arguments[0] ? d.at : null;"
    at = WebDriverWait(driver, 60, poll_frequency=0.02).until(
        lambda d: d.execute_script(script, view)
    )
    return float(at)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--memories", type=int, default=20_000)
    ap.add_argument("--projects", type=int, default=10)
    ap.add_argument("--keep", type=Path, default=None, help="build the home here once, reuse it")
    ap.add_argument(
        "--cold", action="store_true", help="skip the warm-up `ember ui` runs as it starts"
    )
    args = ap.parse_args()
    scratch = None
    home = args.keep
    if home is None:
        scratch = tempfile.TemporaryDirectory(prefix="ember-ui-bench-")
        home = Path(scratch.name) / "home"
    if not (home / "projects").is_dir():
        print(
            f"building {home}: {args.requests:,} requests, {args.memories:,} memories", flush=True
        )
        build(home, args.requests, args.memories, args.projects)
    settings = load_settings(env={"EMBER_HOME": str(home)})
    storage = storage_for(settings)
    busiest = _busiest(home)
    dashboard = Dashboard(settings, storage, spec().views())
    if not args.cold:
        dashboard.warm()  # what `ember ui` does in a thread as it starts
    try:
        with BackgroundServer(dashboard) as server:
            apis = api_times(server.url, busiest)
            page = browser_times(server.url, busiest)
    finally:
        storage.close()
        if scratch is not None:
            scratch.cleanup()
    print(f"\n{'JSON call':<34}{'cold ms':>10}{'warm ms':>10}")
    for label, cold, warm in apis:
        print(f"{label:<34}{cold:>10.1f}{warm:>10.1f}")
    first = sum(c for label, c, _ in apis[:3])
    print(f"{'first paint calls (features+projects+spend 30d), cold':<54}{first:>8.1f} ms")
    if isinstance(page, str):
        print(f"\nbrowser: skipped ({page})")
        return
    print(f"\n{'in chromium':<40}{'ms':>10}")
    for label, ms in page:
        print(f"{label:<40}{ms:>10.1f}")
    worst = max(ms for label, ms in page if label.startswith("spend"))
    verdict = "met" if worst <= 1000 else "NOT met"
    print(
        f"\nfirst paint <= 1000 ms: {verdict} (slowest spend load {worst:.0f} ms; "
        f"median of the two {statistics.median(ms for _, ms in page[:2]):.0f} ms)"
    )


def _busiest(home: Path) -> str:
    return max(
        (p for p in (home / "projects").iterdir()), key=lambda p: (p / "ember.db").stat().st_size
    ).name


if __name__ == "__main__":
    main()

"""The results of ``bench/shadow_cost.py`` and the tables it prints (see there)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ember.prices import PriceTable
from shadow_agent import MODEL

LIGHT_MODEL = "claude-haiku-4-5"
PRICES = PriceTable()


@dataclass
class Reading:
    """One run's numbers (shadow or steward)."""

    path: str
    calls: int
    fresh: int
    read: int
    write: int
    out: int
    usd: float | None
    status: str
    unread: int = 0

    @property
    def total_in(self) -> int:
        return self.fresh + self.read + self.write

    @property
    def read_share(self) -> float:
        return self.read / self.total_in if self.total_in else 0.0


@dataclass
class CostRow:
    size: int
    scenario: str
    session_tokens: int
    own_usd: float
    hot: Reading
    steward: Reading
    cold: Reading

    @property
    def reread_usd(self) -> float:
        """The hot run's whole input billed fresh, and its output, at the session model."""
        price = PRICES.lookup(MODEL)
        assert price is not None
        return (self.hot.total_in * price.input + self.hot.out * price.output) / 1e6


def _usd(x: float | None) -> str:
    return "null" if x is None else f"${x:.4f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or not b else f"{a / b:.2f}"


def print_share(rows: list[CostRow]) -> None:
    print(f"1. hot shadow run: input billed as cache reads (emulator's Anthropic cache, {MODEL})\n")
    head = (
        f"{'session':>8} {'unread':<14} {'msgs':>5} {'prompt tok':>10} {'fresh in':>9} "
        f"{'cache read':>10} {'cache write':>11} {'output':>7} {'read share':>10}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        h = r.hot
        print(
            f"{r.size // 1000:>7}k {r.scenario:<14} {h.unread:>5} {r.session_tokens:>10,} "
            f"{h.fresh:>9,} {h.read:>10,} {h.write:>11,} {h.out:>7,} {h.read_share:>10.1%}"
        )
    print(
        "\nread share = cache read / (fresh + cache read + cache write) of the run's one call; "
        "target >= 90%, goal 97% at 50k"
    )


def print_cost(rows: list[CostRow]) -> None:
    print(
        f"\n2. cost of reading the same backlog, list prices ({PRICES.snapshot}), output included\n"
    )
    head = (
        f"{'session':>8} {'unread':<14} {'hot':>9} {'steward':>9} {'hot/stw':>7} "
        f"{'re-read':>9} {'hot/rr':>6} {'light cold':>10} {'pages':>5} {'hot/light':>9} "
        f"{'hot/own':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.size // 1000:>7}k {r.scenario:<14} {_usd(r.hot.usd):>9} "
            f"{_usd(r.steward.usd):>9} {_ratio(r.hot.usd, r.steward.usd):>7} "
            f"{_usd(r.reread_usd):>9} {_ratio(r.hot.usd, r.reread_usd):>6} "
            f"{_usd(r.cold.usd):>10} {r.cold.calls:>5} {_ratio(r.hot.usd, r.cold.usd):>9} "
            f"{_ratio(r.hot.usd, r.own_usd):>7}"
        )
    print(f"""
hot = the shadow run forking the session ({MODEL}); steward = ember's steward over the same rows
(cold, {MODEL}, rendered pages: the user's words whole, the rest shortened); re-read = the hot
run's whole input billed fresh at {MODEL} plus its output (computed); light cold = the twin
session's shadow run on the cold path ({LIGHT_MODEL}, pages of ~12k tokens); hot/own = the run's
cost over the session's own spend so far (the spend cap's measure, default 0.10)""")
    print("\ntokens per run: path, calls, fresh in / cache read / cache write / output")
    for r in rows:
        for x in (r.hot, r.steward, r.cold):
            print(
                f"  {r.size // 1000}k {r.scenario:<14} {x.path:<8} {x.calls} call(s) "
                f"{x.fresh:>7,} / {x.read:>7,} / {x.write:>6,} / {x.out:>5,}  {x.status}"
            )


def pct(samples: list[float], p: float) -> float:
    xs = sorted(samples)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000


@dataclass
class LatencyResult:
    off: list[float]
    on: list[float]
    paired: list[float]
    runs: dict[str, int]
    shadow_calls: int


def print_latency(res: LatencyResult, sessions: int, interval: float) -> None:
    n = len(res.off)
    print(
        f"\n3. the user's own requests, shadow off vs on: {n} asks each, alternating, "
        f"one every {interval * 1000:.0f} ms, {sessions} sessions per proxy\n"
        "(the asks state nothing worth remembering: no memory is made, so the memory stage has\n"
        "nothing to inject and the difference is the shadow's own work)\n"
    )
    head = f"{'proxy':<24} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}"
    print(head)
    print("-" * len(head))
    for name, xs in (("EMBER_SHADOW=off", res.off), ("EMBER_SHADOW=primary", res.on)):
        print(
            f"{name:<24} {pct(xs, 50):>6.2f}ms {pct(xs, 90):>6.2f}ms {pct(xs, 99):>6.2f}ms "
            f"{max(xs) * 1000:>6.2f}ms"
        )
    med = statistics.median(res.paired) * 1000
    print(
        f"{'added (on - off)':<24} {pct(res.on, 50) - pct(res.off, 50):>6.2f}ms "
        f"{pct(res.on, 90) - pct(res.off, 90):>6.2f}ms {pct(res.on, 99) - pct(res.off, 99):>6.2f}ms"
    )
    print(
        f"{'ratio (on / off)':<24} {pct(res.on, 50) / pct(res.off, 50):>8.2f} "
        f"{pct(res.on, 90) / pct(res.off, 90):>8.2f} {pct(res.on, 99) / pct(res.off, 99):>8.2f}"
    )
    print(f"\npaired = median of (on - off) over back-to-back asks: {med:+.2f} ms")
    runs = ", ".join(f"{k} {v}" for k, v in sorted(res.runs.items()))
    print(
        f"shadow work meanwhile (primary proxy): {res.shadow_calls} shadow calls reached the "
        f"provider during the measured asks; runs by status over the whole cell: {runs}"
    )


@dataclass
class CancelResult:
    delays: list[float]
    user_latency: list[float]
    runs: dict[str, int]
    proposals: int


def print_cancel(res: CancelResult) -> None:
    d = sorted(res.delays)
    print(
        f"\n4. a user message cancels a running shadow call (the provider never answers it): "
        f"{len(d)} trials\n"
    )
    p50 = statistics.median(d) * 1000
    print(
        f"user ask sent -> provider sees the shadow call abandoned: p50 {p50:.1f} ms, "
        f"max {d[-1] * 1000:.1f} ms, min {d[0] * 1000:.1f} ms (target < 100 ms)"
    )
    print(
        f"that ask's own latency: p50 {statistics.median(res.user_latency) * 1000:.1f} ms, "
        f"max {max(res.user_latency) * 1000:.1f} ms"
    )
    print("each trial, ms: " + " ".join(f"{x * 1000:.1f}" for x in res.delays))
    runs = ", ".join(f"{k} {v}" for k, v in sorted(res.runs.items()))
    print(f"runs recorded: {runs}; proposals written: {res.proposals}")

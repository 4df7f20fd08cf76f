"""Tool outputs of a tool-heavy agent session, made up deterministically (tests, the savings
bench, the demo): a pytest run with one failure, an API's orders, search hits, a file tree, a
build log with warnings, a source file.

Each comes with what must survive a shortening byte for byte (``must_keep``): the failing
test and its assertion, the order asked about, every warning, the odd line, the file's whole
text. Seeded: the same call gives the same text on every machine.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Output:
    name: str
    tool: str
    arguments: dict[str, object]
    text: str
    #: lines (or JSON fragments) that must be in whatever the model gets
    must_keep: tuple[str, ...] = field(default=())


def pytest_log(tests: int = 600, seed: int = 1) -> Output:
    rng = random.Random(seed)
    modules = [f"tests/test_{name}.py" for name in ("api", "orders", "billing", "auth", "cli")]
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0",
        "rootdir: /home/dev/shop",
        "configfile: pyproject.toml",
        f"collected {tests} items",
        "",
    ]
    failing = "tests/test_billing.py::test_refund_rounds_half_up"
    for i in range(tests):
        mod = modules[i % len(modules)]
        name = f"{mod}::test_case_{i:03d}_{rng.choice(['parses', 'saves', 'lists', 'rejects'])}"
        if i == 317:
            name = failing
        status = "FAILED" if name == failing else "PASSED"
        lines.append(f"{name} {status} [{(i + 1) * 100 // tests:3d}%]")
    assertion = "E       assert Decimal('10.24') == Decimal('10.25')"
    lines += [
        "",
        "=================================== FAILURES ===================================",
        "_________________________ test_refund_rounds_half_up __________________________",
        "",
        "    def test_refund_rounds_half_up():",
        "        order = make_order(total=Decimal('20.49'))",
        ">       assert refund(order, share=0.5) == Decimal('10.25')",
        assertion,
        "E        +  where Decimal('10.24') = refund(<Order 4411>, share=0.5)",
        "",
        "tests/test_billing.py:88: AssertionError",
        "=========================== short test summary info ============================",
        f"FAILED {failing} - assert Decimal('10.24') == Decimal('10.25')",
        f"======================= 1 failed, {tests - 1} passed in 12.31s ========================",
    ]
    text = "\n".join(lines)
    return Output(
        "pytest log",
        "Bash",
        {"command": "pytest -v", "description": "Run the test suite"},
        text,
        (failing + " FAILED", assertion, "tests/test_billing.py:88: AssertionError"),
    )


def orders_json(count: int = 400, seed: int = 2, asked: str = "ORD-10217") -> Output:
    rng = random.Random(seed)
    orders = []
    for i in range(count):
        oid = f"ORD-{10000 + i}"
        orders.append(
            {
                "id": oid,
                "customer": f"cus_{rng.randrange(10**6):06d}",
                "total": round(rng.uniform(12, 240), 2),
                "currency": "EUR",
                "status": "paid",
                "items": rng.randrange(1, 6),
                "created_at": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
            }
        )
    orders[173]["status"] = "refunded"
    orders[291]["total"] = 98000.0  # the outlier
    text = json.dumps(orders, indent=2)
    asked_record = next(o for o in orders if o["id"] == asked)
    return Output(
        "orders JSON",
        "Bash",
        {"command": "curl -s https://api.shop.internal/v1/orders?limit=400"},
        text,
        (
            f'"id": "{asked}"',
            f'"total": {asked_record["total"]}',
            '"status": "refunded"',
            "98000.0",
        ),
    )


def grep_hits(count: int = 300, seed: int = 3) -> Output:
    rng = random.Random(seed)
    names = ("views", "models", "forms", "tasks", "serializers", "admin", "urls", "utils")
    files = [f"src/shop/{m}/{f}.py" for m in ("api", "billing", "orders") for f in names]
    lines = []
    for i in range(count):
        path = files[(i * 7 // count * 3 + i // 40) % len(files)]
        lines.append(f"{path}:{10 + i * 3 % 400}:    total = order.total  # {rng.randrange(99)}")
    lines.sort()
    first, line, hit = lines[0].split(":", 2)
    return Output(
        "grep hits",
        "Grep",
        {"pattern": "order.total", "output_mode": "content", "-n": True},
        "\n".join(lines),
        (first, f"{line}:{hit}"),  # regrouped: the path once, then the line and its text
    )


def file_tree(count: int = 500, seed: int = 4) -> Output:
    rng = random.Random(seed)
    dirs = [
        f"src/shop/{a}/{b}"
        for a in ("api", "billing", "orders", "auth", "cli")
        for b in ("", "handlers", "models", "tests")
    ]
    paths = sorted(
        {f"{rng.choice(dirs).rstrip('/')}/module_{rng.randrange(900):03d}.py" for _ in range(count)}
    )
    directory, _, name = paths[0].rpartition("/")
    return Output(
        "file tree", "Glob", {"pattern": "**/*.py"}, "\n".join(paths), (directory + "/", name)
    )


def build_log(lines_count: int = 400, seed: int = 5) -> Output:
    rng = random.Random(seed)
    lines = []
    warnings = [
        "warning: unused variable `retries` --> src/sync.rs:88:9",
        "warning: function `legacy_total` is never used --> src/billing.rs:212:4",
        "WARNING: the `shop-ui` bundle is 1.4 MB, above the 1 MB budget",
    ]
    at = {90: warnings[0], 210: warnings[1], 333: warnings[2]}
    for i in range(lines_count):
        if i in at:
            lines.append(at[i])
        else:
            crate = rng.choice(["serde", "tokio", "hyper", "sqlx", "tracing", "axum"])
            lines.append(f"   Compiling {crate} v1.{rng.randrange(40)}.{rng.randrange(9)}")
    lines.append("    Finished `release` profile [optimized] target(s) in 1m 42s")
    return Output(
        "build log", "Bash", {"command": "cargo build --release"}, "\n".join(lines), tuple(warnings)
    )


def source_file(seed: int = 6) -> Output:
    rng = random.Random(seed)
    body = ['"""Refunds: how much of an order goes back, rounded as the law says."""', ""]
    body += ["from decimal import ROUND_HALF_UP, Decimal", "", ""]
    for i in range(60):
        body += [
            f"def helper_{i}(order, share):",
            f'    """Step {i} of the refund ({rng.randrange(100)})."""',
            f"    value = order.total * Decimal(str(share)) + Decimal('{i}')",
            "    return value.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)",
            "",
        ]
    numbered = "\n".join(f"{n + 1:6d}\u2192{line}" for n, line in enumerate(body))
    return Output(
        "source file",
        "Read",
        {"file_path": "/home/dev/shop/src/shop/billing/refund.py"},
        numbered,
        (numbered,),
    )


def session_outputs() -> list[Output]:
    """The tool-heavy session's outputs, in the order the agent gets them."""
    return [pytest_log(), orders_json(), grep_hits(), file_tree(), build_log(), source_file()]

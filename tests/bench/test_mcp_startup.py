"""``bench/mcp_startup.py``: each server is started as a client starts it and lists its tools
(ember's five, checked on every run); the table puts ember beside the SDK's minimal servers."""

from __future__ import annotations

from pathlib import Path

from tests.bench.conftest import bench_module


def test_every_server_lists_its_tools_and_the_table_gives_the_ratios(tmp_path: Path) -> None:
    with bench_module("mcp_startup") as bench:
        rows = bench.asyncio.run(bench.measure(1, tmp_path))
        table = bench.table(rows)
    assert [r.server for r in rows] == ["ember mcp", "sdk MCPServer", "sdk Server"]
    assert all(len(r.seconds) == 1 and 0 < r.seconds[0] < 60 for r in rows)
    assert (
        "ember mcp / sdk MCPServer: median" in table and "ember mcp / sdk Server: median" in table
    )

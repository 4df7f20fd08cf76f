"""A proxy under four agents while ``ember mcp`` saves and forgets on the same project
(``bench/mcp_soak.py``): the file stays intact and every count is exact. Bounded: the agents'
turns and deadline, the cycles, the SDK's read timeout; loopback only."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.conftest import bench_module

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`


def test_a_proxy_and_an_mcp_server_on_one_project_lose_nothing(tmp_path: Path) -> None:
    project = (tmp_path / "soak-project").resolve()
    project.mkdir()
    with bench_module("mcp_soak") as bench:
        s = bench.soak(tmp_path / "home", project, agents=4, turns=12, cycles=40)
    assert s.load.failed == 0, s.load.errors[:3]
    assert s.mcp.errors == []
    assert s.mcp.during_load > 0  # the two really wrote at the same time
    assert s.integrity == "ok"
    assert s.client_rows == s.load.answered == 4 * 12
    assert s.mcp_rows == s.mcp.saved - s.mcp.forgotten
    assert s.mcp_current_with_vectors == s.mcp_rows  # every fact current and embedded
    assert s.fts_rows == s.current_rows

"""Why there is one SQLite library per process (the cause of the corrupted project files)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ember.store import driver


def test_two_sqlite_libraries_in_one_process_both_take_the_write_lock_and_lose_a_commit(
    tmp_path: Path,
) -> None:
    """The failure, reproduced: the stdlib module and sqlean each keep their own table of open
    files, so both writers are granted the lock and one commit silently overwrites the other
    in the WAL. (This test opens the stdlib module on purpose; ember never does.)"""
    stdlib = importlib.import_module("sqlite3")
    if driver.driver() is stdlib:
        pytest.skip("sqlean is not installed: this process already has only one library")
    path = tmp_path / "x.db"
    a = stdlib.connect(path, isolation_level=None)
    a.execute("PRAGMA journal_mode=WAL")
    a.execute("CREATE TABLE t (x)")
    b = driver.connect(path).conn
    a.execute("BEGIN IMMEDIATE")
    a.execute("INSERT INTO t VALUES (1)")
    b.execute("BEGIN IMMEDIATE")  # granted: the other library's lock is invisible here
    b.execute("INSERT INTO t VALUES (2)")
    b.execute("COMMIT")
    a.execute("COMMIT")
    assert [r[0] for r in a.execute("SELECT x FROM t")] == [1]  # row 2 is gone, no error
    a.close()
    b.close()


def test_one_library_makes_a_second_writer_wait_for_the_first(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    a, b = driver.connect(path).conn, driver.connect(path).conn
    b.execute("PRAGMA busy_timeout=50")
    a.execute("CREATE TABLE t (x)")
    a.execute("BEGIN IMMEDIATE")
    with pytest.raises(driver.errors.OperationalError, match="locked"):
        b.execute("BEGIN IMMEDIATE")
    a.execute("ROLLBACK")
    a.close()
    b.close()


def test_the_proxy_never_loads_a_second_sqlite_library(tmp_path: Path) -> None:
    """Serve requests with memory and accounting on, then look at what the process loaded."""
    script = textwrap.dedent(
        f"""
        import sys
        import anthropic
        from ember.config import load_settings
        from ember.memory import HierarchicalMemory
        from ember.compose import build_app
        from ember.server import BackgroundServer
        from ember.testing import Emulator
        from ember.testing.agent import system_prompt
        from ember.project import resolve_project
        from pathlib import Path

        home = Path({str(tmp_path)!r})
        with BackgroundServer(Emulator()) as up:
            s = load_settings(env={{}}, home=home, anthropic_url=up.url, openai_url=up.url + "/v1")
            app = build_app(s)
            with BackgroundServer(app) as proxy:
                with anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0) as c:
                    for i in range(3):
                        c.messages.create(
                            model="claude-sonnet-4-5", max_tokens=64,
                            system=system_prompt("/home/dev/one-lib"),
                            messages=[{{"role": "user", "content": f"ask {{i}}"}}],
                        )
        print("_sqlite3" in sys.modules, "sqlean" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]

"""``EMBER_HOME`` is private to the user: what ``ember wrap`` and the proxy it starts write
(databases, run log, run state) is 0700/0600 and holds no API key at debug level, and a home
an older ember left open to other users is tightened at the start, said in one line."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.server import BackgroundServer
from ember.testing import Emulator
from tests.cli.test_wrap import EMBER, Agents, _wait_free

KEY = "sk-proj-CANARYwrap" + "Vb4" * 20


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    with BackgroundServer(Emulator()) as srv:
        yield Agents(tmp_path, srv.url)


def _loose(home: Path) -> dict[str, str]:
    paths = [home, *home.rglob("*")]
    return {
        str(p): oct(p.stat().st_mode & 0o777)
        for p in paths
        if p.stat().st_mode & 0o777 not in (0o700 if p.is_dir() else 0o600,)
    }


def test_what_wrap_and_its_proxy_write_is_private_and_holds_no_key(agents: Agents) -> None:
    r = agents.wrap(
        "codex", "--cwd", str(agents.project), "--", "exec", "hi",
        FAKE_AGENT_CALL="1", OPENAI_API_KEY=KEY, EMBER_LOG_LEVEL="debug",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert agents.seen()["call"]["status"] == 200
    _wait_free(agents)  # the proxy read the session and stopped
    home = Path(agents.env["EMBER_HOME"])
    log = home / "run" / f"proxy-{agents.port}.log"
    assert "DEBUG" in log.read_text()  # the run log was written at debug level
    assert _loose(home) == {}
    for path in home.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert "private to you" not in r.stderr  # a new home: nothing to tighten


def test_a_home_left_open_is_tightened_by_wrap_in_one_line(agents: Agents) -> None:
    home = Path(agents.env["EMBER_HOME"])
    (home / "run").mkdir(parents=True, mode=0o755)
    home.chmod(0o755)
    (home / "run").chmod(0o755)
    old_log = home / "run" / f"proxy-{agents.port}.log"
    old_log.write_text("--- a run of an older ember\n")
    old_log.chmod(0o644)
    outside = agents.root / "not-ember.txt"  # reached through a link: left as it is
    outside.write_text("mine")
    outside.chmod(0o644)
    (home / "link").symlink_to(outside)
    r = agents.wrap("claude", "--cwd", str(agents.project), FAKE_AGENT_CALL="1")
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "private to you" in line]
    assert said == [
        "ember: made 2 folders and 1 file under "
        f"{home} private to you (they were readable by other users)"
    ]
    _wait_free(agents)
    assert {k: v for k, v in _loose(home).items() if not k.endswith("link")} == {}
    assert outside.stat().st_mode & 0o777 == 0o644
    again = agents.wrap("claude", "--cwd", str(agents.project))
    assert again.returncode == 0 and "private to you" not in again.stderr


def test_a_command_that_only_reads_tightens_an_open_home_too(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "projects" / "p-1").mkdir(parents=True)
    for folder in (home, home / "projects", home / "projects" / "p-1"):
        folder.chmod(0o755)
    (home / "problems.json").write_text("{}")
    (home / "problems.json").chmod(0o644)
    env = {"EMBER_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run(
        [EMBER, "stats", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == (  # the home is in the user's own: shown from ~
        "ember: made 3 folders and 1 file under ~/home private to you (they were readable "
        "by other users)"
    )
    assert _loose(home) == {}

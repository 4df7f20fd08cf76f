"""`ember doctor`: finds a damaged database, recovers what can be read, keeps the old file."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from ember.cli import cli
from ember.memory import HierarchicalMemory
from ember.project import resolve_project
from ember.protocols.base import Usage
from ember.store.accounting import ExchangeRecord, exchanges
from ember.store.database import Database
from ember.store.driver import connect
from ember.store.schema import PROJECT
from tests.memory.conftest import HashEmbedder

CWD = "/home/dev/doctor-project"


def project_db(home: Path) -> Path:
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    return ref.db_path(home)


def fill(path: Path, rows: int = 3000) -> list[str]:
    db = Database(path, PROJECT)
    for i in range(rows):
        rec = ExchangeRecord(
            float(i), f"s{i % 7}", CWD, "anthropic", "m", 200, "ok", True,
            Usage(input_tokens=i, output_tokens=3), 0.001, "snap", 1.0, 0.5,
        )  # fmt: skip
        db.submit(rec.insert)
    db.close()
    with HierarchicalMemory(path, HashEmbedder()) as mem:
        return [mem.add(f"fact number {i} about the deploy pipeline").id for i in range(40)]


def damage_exchanges(path: Path) -> None:
    """Garbage over a few pages in the middle of the accounting table's b-tree."""
    conn = connect(path).conn
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = [int(r[0]) for r in conn.execute("SELECT pageno FROM dbstat WHERE name='exchanges'")]
    conn.close()
    data = bytearray(path.read_bytes())
    for page in pages[len(pages) // 2 : len(pages) // 2 + 3]:
        start = (page - 1) * 4096
        data[start + 8 : start + 4096] = bytes((i * 7) % 256 for i in range(4088))
    path.write_bytes(bytes(data))


def run(home: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["doctor", *args], env={"EMBER_HOME": str(home)})
    return result.exit_code, result.output


def test_doctor_finds_the_damage_and_recover_keeps_the_old_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = project_db(home)
    ids = fill(path)
    damage_exchanges(path)
    code, out = run(home, "--json")
    assert code == 1
    report = json.loads(out)
    bad = [f for f in report["findings"] if not f["ok"]]
    assert [f["subject"] for f in bad] == [str(path)]
    assert "doctor --recover" in bad[0]["fix"]

    code, out = run(home, "--recover", "--json")
    assert code == 0, out
    [rec] = json.loads(out)["recovered"]
    kept = Path(rec["kept_as"])
    assert kept.is_file() and kept.name.startswith("ember.db.damaged-")
    assert 0 < rec["tables"]["exchanges"]["lost"] < 600  # a few pages, not the table
    assert 2400 < len(exchanges(path)) < 3000
    with HierarchicalMemory(path, HashEmbedder()) as mem:  # memories and their search are back
        assert sorted(m.id for m in mem.list()) == sorted(ids)
        assert mem.search("fact number 7 deploy pipeline", top_k=3)
    conn = connect(path, readonly=True).conn
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_recover_refuses_a_database_a_running_proxy_holds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = project_db(home)
    fill(path, rows=10)
    owner = Database(path, PROJECT)
    owner.write(lambda conn: None)  # open, as a proxy holds it
    result = CliRunner().invoke(
        cli, ["doctor", "--recover", "--cwd", CWD], env={"EMBER_HOME": str(home)}
    )
    owner.close()
    assert result.exit_code != 0
    assert "stop it" in str(result.exception)
    assert not list(path.parent.glob("*.damaged-*"))


def test_a_healthy_home_has_no_problems(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fill(project_db(home), rows=5)
    code, out = run(home)
    assert code == 0 and "No problems found." in out


def test_recover_says_exactly_what_a_damaged_page_cost(tmp_path: Path) -> None:
    """Garbage over one leaf of the accounting table: the rows its index names but no page
    holds are counted as lost, one by one; the line printed adds up to what the file held."""
    home = tmp_path / "home"
    path = project_db(home)
    fill(path, rows=2000)
    conn = connect(path).conn
    leaves = conn.execute(
        "SELECT pageno, ncell FROM dbstat WHERE name='exchanges' AND pagetype='leaf' "
        "ORDER BY pageno"
    ).fetchall()
    conn.close()
    page, cells = leaves[len(leaves) // 2]
    data = bytearray(path.read_bytes())
    data[(page - 1) * 4096 + 8 : page * 4096] = bytes((i * 7) % 256 for i in range(4088))
    path.write_bytes(bytes(data))
    code, out = run(home, "--recover", "--json")
    assert code == 0, out
    [rec] = json.loads(out)["recovered"]
    table = rec["tables"]["exchanges"]
    assert rec["exact"] and rec["uncounted"] == []
    assert table["copied"] + table["lost"] == 2000 and 0 < table["lost"] <= cells
    assert len(exchanges(path)) == table["copied"]


def test_recover_prints_what_it_cannot_count(tmp_path: Path) -> None:
    """A file cut short: the counts printed are the ones known, and a line says more may be
    lost than counted (never a confident "0 lost")."""
    home = tmp_path / "home"
    path = project_db(home)
    fill(path, rows=3000)
    with open(path, "r+b") as f:
        f.truncate(int(path.stat().st_size * 0.8))
    code, out = run(home, "--recover")
    assert code == 0, out
    assert "rows copied" in out and "pages past its end are lost" in out
    assert "may be lost than the" in out and "counted" in out
    assert "Traceback" not in out


def test_recover_of_a_garbage_header_copies_every_row(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = project_db(home)
    fill(path, rows=3)
    data = bytearray(path.read_bytes())
    data[:100] = b"\xee" * 100
    path.write_bytes(bytes(data))
    code, out = run(home, "--recover", "--json")
    assert code == 0, out
    [rec] = json.loads(out)["recovered"]
    assert rec["tables"]["exchanges"] == {
        "copied": 3, "lost": 0, "error": None, "rescued": 0, "uncounted": False,
    }  # fmt: skip
    assert len(exchanges(path)) == 3


def test_a_damaged_wal_left_behind_is_a_problem_and_recover_rescues_after_it(
    tmp_path: Path,
) -> None:
    """Opened plainly, such a file looks intact (SQLite's recovery stops at the bad frame
    without a word); the doctor reads the WAL first, and --recover brings back the commits
    after the damage from their intact frames."""
    from tests.store.test_recover import build, garbage

    home = tmp_path / "home"
    path = project_db(home)
    held = build(path, rows=300, keep_wal=True)
    wal = Path(str(path) + "-wal")
    garbage(wal, wal.stat().st_size // 2, 3 * (4096 + 24))
    code, out = run(home, "--json")
    assert code == 1
    [bad] = [f for f in json.loads(out)["findings"] if not f["ok"]]
    assert bad["subject"] == str(path) and "the WAL is damaged" in bad["detail"]
    code, out = run(home, "--recover", "--json")
    assert code == 0, out
    [rec] = json.loads(out)["recovered"]
    assert rec["tables"]["exchanges"]["rescued"] > 0 and not rec["exact"]
    assert rec["tables"]["exchanges"]["copied"] == len(exchanges(path)) <= len(held)

"""The test PostgreSQL (issue #24) as the store's tests will lean on it: a real server with
pgvector and full-text search, run by an unprivileged user, a database per test, and nothing
left running or on disk once it is done."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ember.testing.pg_host import pgserver_install
from ember.testing.postgres import (
    ENV_URL,
    NoPostgresInstall,
    PgServer,
    ServerStartFailed,
    ServerUnreachable,
    UnreachableDirectory,
    postgres_server,
)

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root must switch users")


def stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` from the state on (state, ppid, ...); None once the pid is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        fields = stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and fields[1] == str(pid):
            found.add(int(entry.name))
    return found


def running_from(directory: Path) -> list[int]:
    """Pids whose command line names ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if str(directory).encode() in cmdline:
            found.append(int(entry.name))
    return found


def owned_server(server: PgServer) -> tuple[int, Path]:
    if server.pid is None or server.data_dir is None:
        pytest.skip(f"{ENV_URL}'s server is not this run's to inspect")
    return server.pid, server.data_dir


@pytest.fixture
def open_workdir() -> Iterator[Path]:
    """A directory the server's OS user may enter (pytest's tmp_path is under a 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="ember-pg-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_server_runs_as_an_unprivileged_user_on_no_tcp_port(
    pg_server: PgServer, pg_url: str
) -> None:
    pid, data_dir = owned_server(pg_server)
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT current_setting('data_directory'), current_setting('listen_addresses'),"
            " inet_server_addr()"
        ).fetchone()
    assert row is not None
    assert Path(row[0]) == data_dir
    assert (row[1], row[2]) == ("", None)  # unix socket only
    owner = data_dir.stat().st_uid
    status = Path(f"/proc/{pid}/status").read_text()
    uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
    assert owner != 0
    assert set(uids) == {str(owner)}  # real, effective, saved and fs uid alike
    if os.geteuid() == 0:
        assert pwd.getpwuid(owner).pw_name == "ember-pg"


def test_pgvector_orders_by_cosine_distance_with_and_without_an_index(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, embedding vector(3))")
        conn.execute(
            "INSERT INTO items VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.9,0.1,0]'),"
            " (4, '[-1,0,0]')"
        )
        nearest = "SELECT id FROM items ORDER BY embedding <=> %s::vector LIMIT %s"
        query = "[1,0.05,0]"
        assert [r[0] for r in conn.execute(nearest, (query, 4))] == [1, 3, 2, 4]
        conn.execute("CREATE INDEX ON items USING hnsw (embedding vector_cosine_ops)")
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + nearest, (query, 2)))
        assert "items_embedding_idx" in plan
        assert [r[0] for r in conn.execute(nearest, (query, 2))] == [1, 3]
        with pytest.raises(psycopg.errors.DataException, match="expected 3 dimensions"):
            conn.execute("INSERT INTO items VALUES (5, '[1,0]')")


def test_full_text_search_stems_and_honours_web_search_syntax(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE notes (id int PRIMARY KEY, body text)")
        conn.execute(
            "INSERT INTO notes VALUES (1, 'The tests run with pytest on every push'),"
            " (2, 'Deploys are slow on Fridays'), (3, 'Running the slow tests takes an hour')"
        )
        search = (
            "SELECT id FROM notes WHERE to_tsvector('english', body)"
            " @@ websearch_to_tsquery('english', %s) ORDER BY id"
        )
        assert [r[0] for r in conn.execute(search, ("running tests",))] == [1, 3]
        assert [r[0] for r in conn.execute(search, ("running tests -slow",))] == [1]
        assert [r[0] for r in conn.execute(search, ('"slow tests"',))] == [3]


def test_fresh_databases_are_isolated_and_dropped_with_their_open_connections(
    pg_server: PgServer,
) -> None:
    with contextlib.ExitStack() as closing:
        with pg_server.fresh_database() as first, pg_server.fresh_database() as second:
            assert first != second
            lingering = psycopg.connect(first, autocommit=True)  # a test forgot to close it
            closing.callback(lingering.close)
            lingering.execute("CREATE TABLE notes (body text)")
            lingering.execute("INSERT INTO notes VALUES ('only here')")
            with psycopg.connect(second) as other:
                assert other.execute("SELECT to_regclass('notes')").fetchone() == (None,)
                assert other.execute("SELECT '[1,2]'::vector <-> '[1,2]'").fetchone() == (0.0,)
                names = {lingering.info.dbname, other.info.dbname}
        with pytest.raises(psycopg.OperationalError):  # FORCE ended it with its database
            lingering.execute("SELECT 1")
    with psycopg.connect(pg_server.url) as admin:
        left = {r[0] for r in admin.execute("SELECT datname FROM pg_database")}
    assert len(names) == 2
    assert not names & left


@pytest.mark.parametrize("fails", [False, True], ids=["block-ends", "block-raises"])
def test_teardown_leaves_no_process_and_no_files(fails: bool) -> None:
    seen: dict[str, object] = {}

    class Boom(Exception):
        pass

    expected = pytest.raises(Boom) if fails else contextlib.nullcontext()
    with expected, postgres_server(env={}) as server:
        pid, data_dir = owned_server(server)
        conn = psycopg.connect(server.url)  # a test that fails mid-transaction
        conn.execute("SELECT 1")
        seen.update(pid=pid, data_dir=data_dir, workers=children(pid))
        try:
            if fails:
                raise Boom
        finally:
            conn.close()
    pid, data_dir, workers = seen["pid"], seen["data_dir"], seen["workers"]
    assert isinstance(pid, int) and isinstance(data_dir, Path) and isinstance(workers, set)
    assert len(workers) >= 4  # checkpointer, writers, launchers: all must go too
    assert [p for p in (pid, *workers) if alive(p)] == []
    assert not data_dir.exists()
    assert not data_dir.parent.exists()  # the run directory: log and socket too


def test_a_server_not_ready_in_time_is_stopped_and_the_error_says_so(open_workdir: Path) -> None:
    with (
        pytest.raises(ServerStartFailed, match=r"not ready within 0 s"),
        postgres_server(open_workdir, env={}, start_timeout=0.0),
    ):
        pass
    assert running_from(open_workdir) == []
    assert list(open_workdir.iterdir()) == []


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="no setpriv (util-linux)")
def test_the_server_dies_with_a_test_run_killed_outright(open_workdir: Path) -> None:
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from ember.testing.postgres import postgres_server\n"
        "with postgres_server(Path(sys.argv[1]), env={}) as s:\n"
        "    print(s.pid, flush=True)\n"
        "    time.sleep(60)\n"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", script, str(open_workdir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert run.stdout is not None
        line = run.stdout.readline()
        assert line.strip().isdigit(), "the child could not start a server (its stderr is above)"
        assert alive(int(line))
    finally:
        run.kill()
        run.wait(10)
        if run.stdout is not None:
            run.stdout.close()
    deadline = time.monotonic() + 10
    while running_from(open_workdir) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert running_from(open_workdir) == []


def test_a_missing_install_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with (
        pytest.raises(NoPostgresInstall, match=r"lacks .*nothing/bin/initdb"),
        postgres_server(env={}, install=tmp_path / "nothing"),
    ):
        pass
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with (
        pytest.raises(NoPostgresInstall, match=r"pgserver is not installed"),
        postgres_server(env={}),
    ):
        pass


@as_root
def test_a_workdir_the_server_user_cannot_enter_is_named(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    (closed / "work").mkdir(parents=True)
    closed.chmod(0o700)
    with (
        pytest.raises(UnreachableDirectory, match=f"cannot enter {closed} "),
        postgres_server(closed / "work", env={}),
    ):
        pass
    assert list((closed / "work").iterdir()) == []


@as_root
def test_an_install_the_server_user_cannot_reach_runs_from_a_copy(open_workdir: Path) -> None:
    """As a virtualenv under /root would be: the server still starts, and the closed
    directory is left closed (pgserver itself would open every parent to all users)."""
    original = pgserver_install()
    hidden = open_workdir / "hidden"
    shutil.copytree(original, hidden / "pgserver" / "pginstall", symlinks=True)
    libs = original.parent.parent / "pgserver.libs"
    if libs.is_dir():
        shutil.copytree(libs, hidden / "pgserver.libs", symlinks=True)
    hidden.chmod(0o700)
    with postgres_server(env={}, install=hidden / "pgserver" / "pginstall") as server:
        pid, _ = owned_server(server)
        assert hidden not in Path(os.readlink(f"/proc/{pid}/exe")).parents
        with server.fresh_database() as url, psycopg.connect(url) as conn:
            assert conn.execute("SELECT '[3,4]'::vector <-> '[0,0]'").fetchone() == (5.0,)
    assert hidden.stat().st_mode & 0o777 == 0o700


def test_a_server_given_by_url_is_used_and_left_as_it_was(pg_server: PgServer) -> None:
    def databases() -> set[str]:
        with psycopg.connect(pg_server.url) as admin:
            return {r[0] for r in admin.execute("SELECT datname FROM pg_database")}

    before = databases()
    with postgres_server(env={ENV_URL: pg_server.url}) as given:
        assert (given.url, given.pid, given.data_dir) == (pg_server.url, None, None)
        with given.fresh_database() as url, psycopg.connect(url) as conn:
            assert conn.execute("SELECT '[1,1]'::vector <=> '[2,2]'").fetchone() == (0.0,)
        assert given.template in databases()
    assert databases() == before


def test_a_bad_server_url_is_named_without_its_password(tmp_path: Path) -> None:
    with (
        pytest.raises(ServerUnreachable, match="must be a postgresql:// URL"),
        postgres_server(env={ENV_URL: "localhost:5432"}),
    ):
        pass
    url = f"postgresql://someone:s3cret@/db?host={tmp_path}"  # no socket there
    with (
        pytest.raises(ServerUnreachable, match=r"cannot connect to .*someone:\*\*\*@") as caught,
        postgres_server(env={ENV_URL: url}),
    ):
        pass
    assert "s3cret" not in str(caught.value)

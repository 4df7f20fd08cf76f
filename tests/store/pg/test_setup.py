"""``ember store init URL`` on a real PostgreSQL: a database the role owns is made ready in one
command; a role without rights gets the exact SQL an administrator runs (which then works);
a second role is told how to share the first one's schemas; a missing database, an
unreachable server and a password full of '@', ':' and '/' are each said plainly, never
printing the password."""

from __future__ import annotations

import secrets
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ember.cli import cli
from ember.compose import spec
from ember.testing.postgres import PgServer

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

PASSWORD = "p@ss:w/rd#1?"


def _init(url: str) -> Result:
    return CliRunner().invoke(cli, ["store", "init", url])


def _with(url: str, *, user: str | None = None, database: str | None = None) -> str:
    """``url`` for another role (its password written raw, as a user types it) or database."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{user}:{PASSWORD}@{host}" if user else parts.netloc
    path = f"/{database}" if database else parts.path
    return f"{parts.scheme}://{netloc}{path}" + (f"?{parts.query}" if parts.query else "")


def _sql(output: str) -> list[str]:
    return [line for line in output.splitlines() if line and not line.startswith("--")]


@dataclass
class Cluster:
    """An administrator's connection and the roles and databases a test made (dropped)."""

    admin: Any
    server: PgServer
    roles: list[str]
    databases: list[str]

    def role(self, *, create_on: str | None = None) -> str:
        name = f"r_{secrets.token_hex(4)}"
        self.admin.execute(f'CREATE ROLE "{name}" LOGIN')
        self.roles.append(name)
        if create_on:
            self.admin.execute(f'GRANT CREATE ON DATABASE "{create_on}" TO "{name}"')
        return name

    def database(self) -> str:
        """A database with no pgvector in it (from template0), owned by the administrator."""
        name = f"d_{secrets.token_hex(4)}"
        self.admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        self.databases.append(name)
        return name

    def run(self, database: str, statements: list[str]) -> None:
        with psycopg.connect(self.server.database_url(database), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)


@pytest.fixture
def cluster(pg_server: PgServer) -> Iterator[Cluster]:
    admin = psycopg.connect(pg_server.url, autocommit=True)
    row = admin.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    if not row or not row[0]:
        admin.close()
        pytest.skip("the test server's role is not a superuser: no roles can be made")
    made = Cluster(admin, pg_server, [], [])
    try:
        yield made
    finally:
        for name in made.databases:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        for name in reversed(made.roles):
            admin.execute(f'DROP ROLE IF EXISTS "{name}"')
        admin.close()


def test_a_database_the_role_may_use_is_ready_in_one_command(pg_url: str) -> None:
    done = _init(pg_url)
    assert done.exit_code == 0, done.output
    assert "ready: set store_url" in done.output and "ember_home: " in done.output
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT count(*) FROM ember_home._migrations").fetchone()
    assert row is not None and row[0] > 0
    again = _init(pg_url)
    assert again.exit_code == 0 and "ember_home: up to date" in again.output


def test_a_role_without_rights_gets_the_sql_an_administrator_runs(cluster: Cluster) -> None:
    database = cluster.database()
    role = cluster.role()
    url = _with(cluster.server.database_url(database), user=role)
    refused = _init(url)
    assert refused.exit_code == 1, refused.output
    assert _sql(refused.output) == [
        "CREATE EXTENSION IF NOT EXISTS vector;",
        f'GRANT CREATE ON DATABASE "{database}" TO "{role}";',
    ]
    assert "only a superuser may create the extension" in refused.output
    assert "file" not in refused.output and "p@ss" not in refused.output
    with psycopg.connect(cluster.server.database_url(database)) as conn:
        gone = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'ember_home'")
        assert gone.fetchone() == (0,)  # a failed init leaves the database as it was
    cluster.run(database, _sql(refused.output))
    ready = _init(url)
    assert ready.exit_code == 0, ready.output
    with psycopg.connect(cluster.server.database_url(database)) as conn:
        owner = conn.execute(
            "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'ember_home'"
        ).fetchone()
    assert owner == (role,)


def test_a_second_role_is_told_how_to_share_the_first_ones_schemas(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The first role made ember's schemas (a proxy wrote a project); a second role is told
    to join it and work as it, and then writes into that project's schema."""
    from ember.store.copy import copy_store, parse
    from tests.store.copy.homes import make_home

    database = cluster.database()
    cluster.run(database, ["CREATE EXTENSION vector"])
    first, second = cluster.role(create_on=database), cluster.role(create_on=database)
    first_url = _with(cluster.server.database_url(database), user=first)
    assert _init(first_url).exit_code == 0
    make_home(tmp_path / "a", "a")
    assert copy_store(parse(str(tmp_path / "a")), parse(first_url), features=spec().features).ok

    second_url = _with(cluster.server.database_url(database), user=second)
    told = _init(second_url)
    assert told.exit_code == 1, told.output
    assert _sql(told.output) == [f'GRANT "{first}" TO "{second}";']
    assert f"options=-c%20role%3D{first}" in told.output
    cluster.run(database, _sql(told.output))
    as_first = f"{second_url}&options=-c%20role%3D{first}"
    assert _init(as_first).exit_code == 0
    make_home(tmp_path / "b", "b")
    merged = copy_store(parse(str(tmp_path / "b")), parse(as_first), features=spec().features)
    assert merged.ok, "\n".join(merged.lines())


def test_a_missing_database_gets_the_sql_that_creates_it(cluster: Cluster) -> None:
    role = cluster.role()
    url = _with(cluster.server.database_url("no_such_db"), user=role)
    done = _init(url)
    assert done.exit_code == 1, done.output
    assert _sql(done.output) == [
        f'CREATE DATABASE "no_such_db" OWNER "{role}";',
        '\\connect "no_such_db"',
        "CREATE EXTENSION IF NOT EXISTS vector;",
    ]
    assert "does not exist" in done.output and PASSWORD not in done.output


def test_an_unreachable_server_is_named_without_the_password() -> None:
    from ember.server import free_port

    done = _init(f"postgresql://ember:{PASSWORD}@127.0.0.1:{free_port()}/ember")
    assert done.exit_code == 1, done.output
    assert "cannot reach PostgreSQL at ember@127.0.0.1:" in done.output
    assert "p@ss" not in done.output and "ss:w" not in done.output and not _sql(done.output)


def test_without_a_url_or_store_url_the_command_says_what_to_give(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        cli, ["store", "init"], env={"EMBER_HOME": str(tmp_path), "EMBER_STORE_URL": ""}
    )
    assert done.exit_code == 2 and "give the URL" in done.output


def test_a_role_that_may_not_write_is_told_about_rights_not_files(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A second role that was never granted the first one's schemas: the proxy's health and
    a one-shot command's error speak of the role and the server, and of `ember store init`,
    never of making a file writable."""
    from ember.cmdkit import access
    from ember.config import load_settings
    from ember.errors import StorageError
    from ember.store.copy import copy_store, parse
    from ember.store.schema import PROJECT
    from tests.store.copy.homes import make_home, project_path

    database = cluster.database()
    cluster.run(database, ["CREATE EXTENSION vector"])
    first, second = cluster.role(create_on=database), cluster.role(create_on=database)
    first_url = _with(cluster.server.database_url(database), user=first)
    assert _init(first_url).exit_code == 0
    make_home(tmp_path / "a", "a")
    assert copy_store(parse(str(tmp_path / "a")), parse(first_url), features=spec().features).ok

    second_url = _with(cluster.server.database_url(database), user=second)
    env = {"EMBER_HOME": str(tmp_path / "h"), "EMBER_STORE_URL": second_url}
    settings = load_settings(env=env)
    with (
        pytest.raises(StorageError) as raised,
        access.pg_database(settings, project_path(settings.home), PROJECT) as db,
    ):
        db.write(lambda c: c.execute("DELETE FROM exchanges WHERE id < 0"))
    said = str(raised.value)
    assert said.startswith("PostgreSQL schema ember_p_team_api_"), said
    assert "may not be written by the role of store_url" in said
    assert "ember store init" in said and "file" not in said and "p@ss" not in said
    health = db.health
    assert health.state == "unwritable"
    assert "ember store init" in health.describe() and "file" not in health.describe()


def test_memory_on_an_unreachable_server_names_the_server_not_a_file(tmp_path: Path) -> None:
    from ember.memory import HierarchicalMemory
    from ember.memory.errors import MemoryStoreError
    from ember.server import free_port
    from ember.store.pg.database import PgDatabase
    from ember.store.pg.url import check_store_url
    from ember.store.schema import PROJECT, for_postgres

    url = check_store_url(f"postgresql://ember:{PASSWORD}@127.0.0.1:{free_port()}/ember")
    assert url is not None
    path = tmp_path / "projects" / "x-0123456789abcdef" / "ember.db"
    db = PgDatabase(
        path, for_postgres(PROJECT), url=url, schema_name="ember_p_x_0123456789abcdef",
        log_failures=False,
    )  # fmt: skip
    try:
        with pytest.raises(MemoryStoreError) as raised:
            HierarchicalMemory(db, None)
    finally:
        db.close()
    said = str(raised.value)
    assert "PostgreSQL schema ember_p_x_0123456789abcdef on ember@127.0.0.1:" in said
    assert str(path) not in said and "p@ss" not in said and not path.exists()

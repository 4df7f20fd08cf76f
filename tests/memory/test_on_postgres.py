"""Memory on PostgreSQL (issue #24): the same facts and asks give the same hits with the same
scores as on SQLite, two projects' memories never meet, and the real proxy with ``store_url``
injects a fact saved in the project's schema into a new session's request.

Against a real PostgreSQL with pgvector (``pg_url``); the core behaviours themselves run on
it in ``test_core.py`` (its ``index_kind`` "postgres")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ember.cli import cli
from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory, NewMemory
from ember.project import resolve_project
from ember.store.pg.names import schema_name
from tests.conftest import StackFactory
from tests.memory.conftest import Clock, HashEmbedder, OpenStore, pg_database
from tests.memory.test_stage_e2e import ACME, FACTS, memory_blocks, memory_stage, run_agent, sent

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

SET = Path(__file__).parents[2] / "bench" / "data" / "memory_conversations.json"


@pytest.fixture
def index_kind() -> str:
    return "postgres"


def test_the_conversation_set_ranks_the_same_with_the_same_scores(
    open_store: OpenStore, tmp_path: Path, embedder: HashEmbedder, clock: Clock
) -> None:
    """Every turn of the repository's conversations in both stores, every question asked of
    both: the same memories in the same order, with the same scores (the calibrated floor
    then means the same thing on either backend)."""
    data = json.loads(SET.read_text(encoding="utf-8"))
    items = [
        NewMemory(t["text"], session_id=f"s{t['session']}", category="turn",
                  created_at=clock.now - 60.0 * (len(data["turns"]) - i))
        for i, t in enumerate(data["turns"])
    ]  # fmt: skip
    pg = open_store()
    sqlite = HierarchicalMemory(tmp_path / "sqlite" / "ember.db", embedder, clock=clock)
    try:
        pg.add_many(items)
        sqlite.add_many(items)
        assert pg.count() == sqlite.count() > 1000
        compared = 0
        for q in data["questions"]:
            want = sqlite.search(q["question"], top_k=10, touch=False)
            got = pg.search(q["question"], top_k=10, touch=False)
            assert [h.memory.content for h in got] == [h.memory.content for h in want], q
            assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-9)
            compared += bool(want)
        assert compared > len(data["questions"]) // 2
    finally:
        sqlite.close()


def test_two_projects_memories_never_meet(open_store: OpenStore) -> None:
    acme, beta = open_store("acme"), open_store("beta")
    fact = acme.add("The acme release key lives in the vault", importance=0.9, session_id="s1")
    assert [h.memory.id for h in acme.search("where is the release key")][:1] != []
    assert beta.search("where is the release key") == []
    assert beta.get(fact.id) is None and beta.count() == 0
    theirs = beta.add("The beta release key lives in a drawer")
    assert {h.memory.id for h in acme.search("release key")}.isdisjoint({theirs.id})


def test_the_proxy_injects_a_fact_saved_in_the_projects_schema(
    make_stack: StackFactory, pg_url: str
) -> None:
    stack = make_stack(stages=memory_stage, store_url=pg_url)
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None
    path = ref.db_path(stack.home)
    db = pg_database(pg_url, stack.home, path)
    try:
        with HierarchicalMemory(db, get_embedder()) as mem:
            ids = [mem.add(f, importance=0.8).id for f in FACTS]
    finally:
        db.close()
    assert not path.exists()  # nothing on file: the facts are in the schema
    run_agent(stack)
    first, *_ = sent(stack)
    [block] = memory_blocks(first["messages"][0])
    assert f"[{ids[0]}]" in block and "empty password" in block
    with psycopg.connect(pg_url) as conn:
        schema = schema_name(stack.home, path)
        [(n,)] = conn.execute(f"SELECT COUNT(*) FROM {schema}.memory_injections").fetchall()
    assert n >= 1  # the ledger is on the server too
    before = len(sent(stack))
    # Another project, even in the same session: a request that names its own project is
    # served by it, never by the project its session was first bound to.
    run_agent(stack, cwd="/home/dev/other/acme-api")
    later = sent(stack)[before:]
    assert later and not any(memory_blocks(m) for r in later for m in r["messages"])


def test_the_memory_command_reads_and_writes_the_projects_schema(
    pg_url: str, tmp_path: Path
) -> None:
    """With ``store_url`` set, ``ember memory`` works on the memories the proxy keeps on the
    server, and leaves no file behind."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EMBER_")}
    env["EMBER_HOME"] = str(tmp_path / "home")

    def ember(*args: str, **extra: str) -> Any:
        out = CliRunner().invoke(
            cli, ["memory", *args, "--project-id", "acme", "--json"],
            obj={"embedder": HashEmbedder}, env=env | extra,
        )  # fmt: skip
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    on_pg = {"EMBER_STORE_URL": pg_url}
    assert ember("list", **on_pg) == []
    added = ember("add", "Builds use ninja", **on_pg)
    found = ember("search", "which build tool", **on_pg)
    assert [h["id"] for h in found["hits"]] == [added["id"]]
    assert ember("list", **on_pg)[0]["id"] == added["id"]
    assert ember("list") == []  # the file store knows nothing of it
    assert not list((tmp_path / "home").rglob("ember.db"))


def test_two_machines_clones_of_one_repository_share_its_memory(
    pg_url: str, tmp_path: Path
) -> None:
    """A team's store: the repository sits at another path on each machine. Named by its
    git remote, what one developer saved is found from the other's clone; named by path
    (the default), they were two projects."""
    import subprocess

    clones = []
    for who, url in (
        ("alice", "git@github.com:acme/api.git"),
        ("bob", "https://github.com/acme/api"),
    ):
        where = tmp_path / who / "work" / f"api-{who}"
        where.mkdir(parents=True)
        subprocess.run(["git", "init", "-q"], cwd=where, check=True)
        subprocess.run(["git", "remote", "add", "origin", url], cwd=where, check=True)
        clones.append(where)
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EMBER_")}

    def ember(who: int, *args: str, **extra: str) -> Any:
        home = {"EMBER_HOME": str(tmp_path / f"home{who}"), "EMBER_STORE_URL": pg_url}
        out = CliRunner().invoke(
            cli, ["memory", *args, "--cwd", str(clones[who]), "--json"],
            obj={"embedder": HashEmbedder}, env=env | home | extra,
        )  # fmt: skip
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    team = {"EMBER_PROJECT_IDENTITY": "git-remote"}
    saved = ember(0, "add", "Releases are cut from the release branch on Thursdays", **team)
    found = ember(1, "search", "when are releases cut", **team)
    assert [h["id"] for h in found["hits"]] == [saved["id"]]
    assert ember(1, "search", "when are releases cut")["hits"] == []  # by path: not shared

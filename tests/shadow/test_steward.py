"""The steward: the cold re-read with the session's model, against the provider emulator."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ember.prices import PriceTable
from ember.project import ProjectRef
from ember.protocols.base import ProtocolAdapter
from ember.proxy.upstream import Upstream
from ember.server import BackgroundServer
from ember.shadow import cursors
from ember.shadow.models import FactIn
from ember.shadow.steward import STEWARD_SYSTEM, Steward
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.registry import Storage
from ember.store.transcript_rows import Row, insert_rows
from ember.testing import Emulator
from ember.testing.replies import Reply

PROJECT = ProjectRef("acme", "header:x-ember-project-id")
S = "sess-steward"
MODEL = "claude-sonnet-4-5"
KEY = [("x-api-key", "sk-test-steward"), ("anthropic-version", "2023-06-01")]


@pytest.fixture
def emulator() -> Iterator[tuple[Emulator, str]]:
    emu = Emulator()
    with BackgroundServer(emu) as server:
        yield emu, server.url


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    client = Upstream(5.0, 30.0)
    yield client
    await client.close()


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    """The process's storage on either backend (issue #24): the steward's runs, facts,
    marks and accounting are the same in a project's file and in its PostgreSQL schema."""
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    store = Storage(tmp_path / "home", vec=False, store_url=url)
    yield store
    store.close()


def steward(storage: Storage, upstream: Upstream, base: str, **kw: Any) -> Steward:
    def url_for(adapter: ProtocolAdapter, path: str, query: str) -> str:
        return base + path

    return Steward(storage, upstream, url_for, PriceTable(), **kw)


def project_db(storage: Storage) -> Database:
    return storage.database(PROJECT.db_path(storage.home))


def transcript(db: Database, generation: int = 1, session: str = S) -> list[str]:
    """A small session: the user states a convention, a tool runs, the assistant answers."""
    texts = [
        ("user", "user", "We always deploy from a separate worktree, never from main."),
        ("assistant", "assistant", "Understood. Running the deploy script from the worktree."),
        ("tool", "tool_result", "deploy ok: 3 services updated"),
        ("tool", "tool_error", "lint failed: 2 errors"),
    ]
    rows = [
        Row(f"m{session[-4:]}{generation}{i}", session, generation, i, 0, role, kind, f"d{i}", text)
        for i, (role, kind, text) in enumerate(texts)
    ]
    db.write(lambda c: insert_rows(c, rows))
    return [r.id for r in rows]


def answer(*facts: Mapping[str, Any]) -> Reply:
    return Reply("Here is what I found:\n```json\n" + json.dumps({"facts": list(facts)}) + "\n```")


def fact(content: str, *evidence: tuple[str, str]) -> dict[str, Any]:
    return {"content": content, "evidence": [{"kind": k, "messageId": m} for k, m in evidence]}


def rows(db: Database, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
    return db.read(lambda c: [dict(r) for r in c.execute(sql, tuple(args))])


async def test_a_run_writes_its_facts_marks_the_window_digested_and_is_accounted(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)  # shadow memory enabled before the session spoke
    ids = transcript(db)
    emu.script(
        answer(
            fact("Deploys run from a separate worktree", ("user-stated", ids[0])),
            # a tool *error* is no verification: kept, with why, beside its valid sibling
            fact("Lint passes", ("tool-verified", ids[3])),
        )
    )
    run_id = await steward(storage, upstream, base).run(
        S, 1, PROJECT, "anthropic", KEY, model=MODEL
    )
    storage.flush(5)
    assert run_id is not None

    [run] = rows(db, "SELECT * FROM steward_runs")
    assert (run["id"], run["status"], run["model"], run["calls"]) == (run_id, "completed", MODEL, 1)
    assert run["input_tokens"] > 0 and run["output_tokens"] > 0
    assert run["estimated_usd"] is not None and run["price_snapshot"] == PriceTable().snapshot
    facts = rows(db, "SELECT * FROM steward_facts ORDER BY validation_error IS NOT NULL")
    assert [f["content"] for f in facts] == ["Deploys run from a separate worktree", "Lint passes"]
    assert facts[0]["validation_error"] is None
    assert "tool_result" in facts[1]["validation_error"]
    evidence = rows(db, "SELECT fact_id, kind, message_id FROM steward_fact_evidence")
    assert evidence == [{"fact_id": facts[0]["id"], "kind": "user-stated", "message_id": ids[0]}]
    seqs = [r["seq"] for r in rows(db, "SELECT seq FROM transcript_messages ORDER BY seq")]
    [mark] = rows(db, "SELECT * FROM steward_digested")
    assert (mark["session_id"], mark["generation"], mark["through_seq"]) == (S, 1, seqs[-1])
    assert (run["from_seq"], run["through_seq"]) == (seqs[0], seqs[-1])
    [acct] = rows(db, "SELECT * FROM exchanges")
    assert (acct["origin"], acct["session_id"], acct["model"]) == ("steward", S, MODEL)
    assert acct["cost_usd"] == pytest.approx(run["estimated_usd"])
    # the session's own totals stay the user's: the steward's call is not in them
    assert rows(db, "SELECT * FROM session_totals") == []

    sent = emu.last_request.json()
    assert sent["model"] == MODEL and sent["system"] == STEWARD_SYSTEM
    assert f"m:{ids[0]} user: We always deploy" in sent["messages"][0]["content"]
    assert emu.last_request.api_key == "sk-test-steward"


async def test_digested_rows_are_not_read_twice(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    transcript(db)
    st = steward(storage, upstream, base)
    emu.script(answer())
    assert await st.run(S, 1, PROJECT, "anthropic", KEY, model=MODEL) is not None
    calls = len(emu.requests)
    assert await st.run(S, 1, PROJECT, "anthropic", KEY, model=MODEL) is None
    assert len(emu.requests) == calls


async def test_the_steward_reads_no_further_than_the_shadow_run_it_is_compared_with(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    ids = transcript(db)
    seqs = [r["seq"] for r in rows(db, "SELECT seq FROM transcript_messages ORDER BY seq")]
    emu.script(answer())
    await steward(storage, upstream, base).run(
        S, 1, PROJECT, "anthropic", KEY, model=MODEL, through_seq=seqs[1]
    )
    page = emu.last_request.json()["messages"][0]["content"]
    assert f"m:{ids[1]}" in page and f"m:{ids[2]}" not in page
    [mark] = rows(db, "SELECT through_seq FROM steward_digested")
    assert mark["through_seq"] == seqs[1]


async def test_history_from_before_shadow_was_enabled_is_read_by_neither(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    """The steward starts where the shadow's own cursor starts: rows on file before the
    activation watermark are no part of the comparison window."""
    emu, base = emulator
    db = project_db(storage)
    transcript(db)  # recorded before shadow memory was enabled
    assert (
        await steward(storage, upstream, base).run(S, 1, PROJECT, "anthropic", KEY, model=MODEL)
        is None
    )
    assert emu.requests == []
    [cur] = rows(db, "SELECT * FROM shadow_cursors")
    assert cur["initialization"] == "enabled"


async def test_the_shadow_cursor_never_inherits_a_mark_the_steward_set_during_the_comparison(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    transcript(db)
    emu.script(answer())
    await steward(storage, upstream, base).run(S, 1, PROJECT, "anthropic", KEY, model=MODEL)
    shadow = db.write(lambda c: cursors.ensure_cursor(c, S, 1))
    assert shadow.ready == 0  # the shadow still reads the whole window the steward read


async def test_the_session_model_is_its_own_threads_not_a_side_requests(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    transcript(db)

    def exchange(ts: float, model: str, kind: str) -> ExchangeRecord:
        return ExchangeRecord(
            ts,
            S,
            "acme",
            "anthropic",
            model,
            200,
            "ok",
            False,
            None,
            None,
            "x",
            1.0,
            None,
            thread=kind,
            thread_kind=kind,
        )

    db.write(exchange(1.0, MODEL, "main").insert)
    db.write(exchange(2.0, "claude-haiku-4-5", "side").insert)  # the title request, later
    emu.script(answer())
    await steward(storage, upstream, base).run(S, 1, PROJECT, "anthropic", KEY)
    assert emu.last_request.json()["model"] == MODEL


async def test_without_credentials_the_run_is_recorded_as_skipped_with_why(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    transcript(db)
    run_id = await steward(storage, upstream, base).run(
        S, 1, PROJECT, "anthropic", None, model=MODEL
    )
    [run] = rows(db, "SELECT * FROM steward_runs")
    assert (run["id"], run["status"]) == (run_id, "skipped")
    assert "credentials" in run["reason"]
    assert emu.requests == [] and rows(db, "SELECT * FROM steward_digested") == []


async def test_a_failed_answer_is_charged_keeps_the_window_and_backs_off_after_three(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    transcript(db)
    now = [1000.0]
    st = steward(storage, upstream, base, clock=lambda: now[0])
    emu.script(*[Reply("I think they deploy from a worktree.")] * 4)
    for _ in range(4):
        await st.run(S, 1, PROJECT, "anthropic", KEY, model=MODEL)
    storage.flush(5)
    failed = rows(db, "SELECT * FROM steward_runs")
    assert [r["status"] for r in failed] == ["failed"] * 3  # the fourth waits out the backoff
    assert all("no fenced json" in r["error"] and r["output_tokens"] > 0 for r in failed)
    assert all(r["estimated_usd"] is not None for r in failed)
    assert len(rows(db, "SELECT * FROM exchanges WHERE origin='steward'")) == 3
    assert rows(db, "SELECT * FROM steward_facts") == []
    assert rows(db, "SELECT * FROM steward_digested") == []
    now[0] += 6 * 3600 + 1
    await st.run(S, 1, PROJECT, "anthropic", KEY, model=MODEL)
    assert len(rows(db, "SELECT * FROM steward_runs")) == 4


async def test_an_unpriced_model_costs_null_not_zero(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    transcript(db)
    emu.script(answer())
    await steward(storage, upstream, base).run(
        S, 1, PROJECT, "anthropic", KEY, model="claude-unpriced-9"
    )
    [run] = rows(db, "SELECT status, estimated_usd FROM steward_runs")
    assert run == {"status": "completed", "estimated_usd": None}


async def test_checked_facts_are_promoted_and_linked_to_their_memories(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    ids = transcript(db)
    got: list[tuple[ProjectRef, str, list[str]]] = []

    async def promote(
        project: ProjectRef, session_id: str, facts: Sequence[tuple[str, FactIn]]
    ) -> dict[str, str]:
        got.append((project, session_id, [f.content for _, f in facts]))
        return {fid: f"mem-{i}" for i, (fid, _) in enumerate(facts)}

    emu.script(
        answer(
            fact("Deploys run from a separate worktree", ("user-stated", ids[0])),
            fact("Invented", ("user-stated", "m-not-there")),
        )
    )
    await steward(storage, upstream, base, promote=promote).run(
        S, 1, PROJECT, "anthropic", KEY, model=MODEL
    )
    assert got == [(PROJECT, S, ["Deploys run from a separate worktree"])]
    # NULL first on both backends (PostgreSQL sorts NULL last by default)
    linked = rows(
        db, "SELECT content, memory_id FROM steward_facts ORDER BY memory_id IS NOT NULL, memory_id"
    )
    assert linked == [
        {"content": "Invented", "memory_id": None},
        {"content": "Deploys run from a separate worktree", "memory_id": "mem-0"},
    ]


async def test_a_promote_that_fails_leaves_the_run_standing(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    ids = transcript(db)

    async def promote(
        project: ProjectRef, session_id: str, facts: Sequence[tuple[str, FactIn]]
    ) -> dict[str, str]:
        raise RuntimeError("memory store is closed")

    emu.script(answer(fact("Deploys run from a separate worktree", ("user-stated", ids[0]))))
    run_id = await steward(storage, upstream, base, promote=promote).run(
        S, 1, PROJECT, "anthropic", KEY, model=MODEL
    )
    [run] = rows(db, "SELECT id, status FROM steward_runs")
    assert run == {"id": run_id, "status": "completed"}


@pytest.mark.parametrize(
    ("protocol", "model", "credentials"),
    [
        ("anthropic", MODEL, KEY),
        ("openai_chat", "gpt-5", [("authorization", "Bearer sk-test-steward")]),
        ("openai_responses", "gpt-5", [("authorization", "Bearer sk-test-steward")]),
    ],
)
async def test_the_steward_speaks_the_sessions_own_wire_format(
    emulator: tuple[Emulator, str],
    upstream: Upstream,
    storage: Storage,
    protocol: str,
    model: str,
    credentials: list[tuple[str, str]],
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    ids = transcript(db)
    emu.script(answer(fact("Deploys run from a separate worktree", ("user-stated", ids[0]))))
    await steward(storage, upstream, base).run(S, 1, PROJECT, protocol, credentials, model=model)
    [run] = rows(db, "SELECT status, model, input_tokens, estimated_usd FROM steward_runs")
    assert run["status"] == "completed" and run["model"] == model
    assert run["input_tokens"] > 0 and run["estimated_usd"] is not None
    [f] = rows(db, "SELECT validation_error FROM steward_facts")
    assert f["validation_error"] is None
    assert emu.last_request.api_key == "sk-test-steward"

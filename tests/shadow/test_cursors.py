"""Where a session's shadow starts reading (seed 000 §7): the three properties."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.shadow import cursors, runs
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.transcript_rows import Row, insert_rows, unread
from tests.shadow.backends import BACKENDS, project_db


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A project database on either backend: the cursors move the same way on both."""
    database = project_db(request.param, tmp_path, request)
    yield database
    database.close()


def add(db: Database, session: str, generation: int, n: int, start: int = 0) -> list[int]:
    rows = [
        Row(
            f"m-{session}-{generation}-{i}",
            session,
            generation,
            i,
            0,
            "user",
            "user",
            f"d{i}",
            f"text {i}",
        )
        for i in range(start, start + n)
    ]
    db.write(lambda c: insert_rows(c, rows))
    return db.read(
        lambda c: [
            int(r[0])
            for r in c.execute(
                "SELECT seq FROM transcript_messages WHERE session_id=? AND generation=? "
                "ORDER BY seq",
                (session, generation),
            )
        ]
    )


def digest_by_steward(db: Database, session: str, generation: int, through: int) -> None:
    db.write(
        lambda c: c.execute(
            "INSERT INTO steward_digested VALUES (?,?,?) ON CONFLICT (session_id, generation) "
            "DO UPDATE SET through_seq = excluded.through_seq",
            (session, generation, through),
        )
    )


def cursor(db: Database, session: str, generation: int) -> cursors.Cursor:
    return db.write(lambda c: cursors.ensure_cursor(c, session, generation))


def complete_run(db: Database, session: str, generation: int, through: int) -> None:
    def job(c: Connection) -> None:
        rid = runs.new_id("r")
        runs.start_run(c, rid, session, generation, "hot", "turn-ended", "m", 0, through)
        runs.finish_run(c, rid, runs.Finish("completed"))

    db.write(job)


def test_inherit_rows_the_steward_digested_are_not_read_its_backlog_is(db: Database) -> None:
    seqs = add(db, "s", 1, 6)
    digest_by_steward(db, "s", 1, seqs[2])  # the steward read the first three
    db.write(cursors.activate)
    c = cursor(db, "s", 1)
    assert (c.initialization, c.baseline) == ("steward", seqs[2])
    left = db.read(lambda conn: unread(conn, "s", 1, c.ready))
    assert [m.seq for m in left] == seqs[3:]
    # the shadow never touches the steward's marks
    marks = db.read(
        lambda conn: conn.execute("SELECT through_seq FROM steward_digested").fetchall()
    )
    assert [m[0] for m in marks] == [seqs[2]]


def test_without_steward_history_before_enablement_is_skipped(db: Database) -> None:
    before = add(db, "s", 1, 4)
    mark = db.write(cursors.activate)
    assert mark == before[-1]
    after = add(db, "s", 1, 2, start=4)[4:]
    c = cursor(db, "s", 1)
    assert (c.initialization, c.baseline) == ("enabled", before[-1])
    assert [m.seq for m in db.read(lambda conn: unread(conn, "s", 1, c.ready))] == after


def test_independent_of_the_steward_once_initialised(db: Database) -> None:
    seqs = add(db, "s", 1, 4)
    digest_by_steward(db, "s", 1, seqs[0])
    db.write(cursors.activate)
    first = cursor(db, "s", 1)
    digest_by_steward(db, "s", 1, seqs[3])  # the steward moves on...
    again = cursor(db, "s", 1)  # ...and initialising again changes nothing
    assert again.baseline == first.baseline == seqs[0]
    complete_run(db, "s", 1, seqs[1])  # only the shadow's own runs move it
    assert cursor(db, "s", 1).ready == seqs[1]
    # A new generation does not inherit the steward's position in the old one.
    gen2 = add(db, "s", 2, 2)
    c2 = cursor(db, "s", 2)
    assert c2.baseline == 0
    assert [m.seq for m in db.read(lambda conn: unread(conn, "s", 2, c2.ready))] == gen2


def test_the_activation_watermark_is_written_once(db: Database) -> None:
    add(db, "s", 1, 2)
    first = db.write(cursors.activate)
    add(db, "s", 1, 3, start=2)
    assert db.write(cursors.activate) == first


def conversation(db: Database, session: str, roles: str, start: int = 0) -> list[int]:
    """Messages at positions ``start``.. (``u``: the user's; ``a``, ``A``: an answer); the
    seqs of all the session's messages."""
    rows = []
    for i, r in enumerate(roles, start):
        role = "user" if r == "u" else "assistant"
        rows.append(Row(f"c-{session}-{i}", session, 1, i, 0, role, role, f"d{i}", f"said {i}"))
    db.write(lambda c: insert_rows(c, rows))
    sql = "SELECT seq FROM transcript_messages WHERE session_id=? ORDER BY seq"
    return db.read(lambda c: [int(r[0]) for r in c.execute(sql, (session,))])


def test_a_generation_starts_after_the_last_answer_its_first_request_held(db: Database) -> None:
    """The request came back with ``u a u a u`` (answered at position 5): the first four are
    history, the new turn and the answer are read — none of it depends on the watermark."""
    db.write(cursors.activate)
    seqs = conversation(db, "s", "uauauA")  # the request and its answer
    db.write(lambda c: cursors.mark_start(c, "s", 1, 5))
    c = cursor(db, "s", 1)
    assert (c.initialization, c.baseline) == ("enabled", seqs[3])
    # marked once: a later request (or a restarted proxy) does not move it
    conversation(db, "s", "uA", start=6)
    db.write(lambda c: cursors.mark_start(c, "s", 1, 7))
    assert db.read(lambda c: cursors.start(c, "s", 1)) == seqs[3]


def test_a_conversation_first_seen_at_its_first_message_is_read_whole(db: Database) -> None:
    conversation(db, "s", "u")
    db.write(cursors.activate)  # everything so far is below the watermark
    conversation(db, "s", "A", start=1)
    db.write(lambda c: cursors.mark_start(c, "s", 1, 1))
    c = cursor(db, "s", 1)
    assert c.baseline == 0
    assert len(db.read(lambda conn: unread(conn, "s", 1, c.ready))) == 2


def test_the_start_does_not_depend_on_what_was_recorded_before_enablement(
    db: Database,
) -> None:
    """Two sessions come back with the same request; the first was partly recorded before
    shadow memory was enabled, the second not at all. Both are read from the same turn."""
    early = conversation(db, "recorded", "uau")  # recorded by another feature, shadow off
    db.write(cursors.activate)
    seqs = {"recorded": early + conversation(db, "recorded", "auA", start=3)[3:]}
    seqs["unrecorded"] = conversation(db, "unrecorded", "uauauA")
    for session in seqs:
        db.write(lambda c, s=session: cursors.mark_start(c, s, 1, 5))
    read = {}
    for s in seqs:
        baseline = cursor(db, s, 1).baseline
        left = db.read(lambda conn, s=s, b=baseline: unread(conn, s, 1, b))
        read[s] = [m.position for m in left]
    assert read == {"recorded": [4, 5], "unrecorded": [4, 5]}

"""The last layer: SQLite refuses cross-session evidence even when the service is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.shadow import runs
from ember.store.database import Database
from ember.store.driver import Connection, errors
from ember.store.schema import PROJECT
from ember.store.transcript_rows import Row, insert_rows


@pytest.fixture
def db(tmp_path: Path) -> Database:
    d = Database(tmp_path / "p.db", PROJECT)
    rows = [
        Row("mAAA", "A", 1, 0, 0, "user", "user", "d1", "deploy to eu-west-1"),
        Row("mBBB", "B", 1, 0, 0, "user", "user", "d2", "deploy to us-east-1"),
    ]

    def setup(c: Connection) -> None:
        insert_rows(c, rows)
        runs.start_run(c, "r1", "A", 1, "hot", "turn-ended", "m", 1, 1)
        for pid, error in (("valid", None), ("invalid", "service said no")):
            c.execute(
                "INSERT INTO shadow_fact_proposals (id, run_id, session_id, content, evidence, "
                "validation_error, created_at) VALUES (?, 'r1', 'A', 'x', '[]', ?, 0)",
                (pid, error),
            )

    d.write(setup)
    yield d  # type: ignore[misc]
    d.close()


def evidence(db: Database, proposal: str, message: str | None, session: str | None) -> None:
    db.write(
        lambda c: c.execute(
            "INSERT INTO shadow_proposal_evidence (proposal_id, kind, message_id, session_id) "
            "VALUES (?, 'observed-outcome', ?, ?)",
            (proposal, message, session),
        )
    )


def test_a_valid_proposal_citing_another_sessions_message_is_refused_by_sql(db: Database) -> None:
    with pytest.raises(errors.IntegrityError, match="own session"):
        evidence(db, "valid", "mBBB", None)


def test_a_valid_proposal_citing_another_session_is_refused_by_sql(db: Database) -> None:
    with pytest.raises(errors.IntegrityError, match="own session"):
        evidence(db, "valid", None, "B")


def test_a_valid_proposal_citing_a_message_ember_never_saw_is_refused_by_sql(db: Database) -> None:
    with pytest.raises(errors.IntegrityError, match="own session"):
        evidence(db, "valid", "mZZZ", None)


def test_its_own_sessions_evidence_is_accepted(db: Database) -> None:
    evidence(db, "valid", "mAAA", None)
    evidence(db, "valid", None, "A")


def test_an_invalid_proposal_keeps_what_it_claimed_for_the_comparison(db: Database) -> None:
    evidence(db, "invalid", "mBBB", None)  # kept, as the rejected claim it is

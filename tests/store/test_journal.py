"""The answer journal: what a killed proxy answered without writing the row is counted, once.

A journal "dies" here the way a killed process's does: its files stay, its locks go (the fds
are closed without the journal's own close). The recount then runs as a starting proxy's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.protocols.base import Usage
from ember.store.accounting import ExchangeRecord
from ember.store.journal import AnswerJournal, journal_dir
from ember.store.journalcheck import dead_segments, recount
from ember.store.problems import read_problems
from ember.store.registry import Storage, stats_db_path

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`


def record(ts: float, session: str) -> ExchangeRecord:
    return ExchangeRecord(
        ts, session, "/p", "anthropic", "m", 200, "ok", True,
        Usage(input_tokens=5, output_tokens=3), 0.001, "snap", 1.0, 0.5,
    )  # fmt: skip


def die(journal: AnswerJournal) -> None:
    """What a kill -9 does to the journal: the files stay, the process's locks are gone."""
    for segment in list(journal._segments):
        os.close(segment.fd)


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    s = Storage(tmp_path / "home", vec=False)
    yield s
    s.close()


def test_a_segment_goes_once_every_row_of_it_is_written(tmp_path: Path) -> None:
    journal = AnswerJournal(tmp_path / "journal", segment_entries=3)
    tickets = [journal.answered(float(i), "s", tmp_path / "p.db") for i in range(7)]
    assert len(journal.segments) == 3  # 3 + 3 + the current one
    for t in tickets[:6]:
        journal.retire(t)
    assert len(journal.segments) == 1  # the two full ones, all retired, are gone
    journal.close()
    assert tickets[6] is not None and journal.segments == [tickets[6].path]
    journal.retire(tickets[6])  # the last row is written after the stop began
    assert list((tmp_path / "journal").iterdir()) == []


def test_a_live_journal_is_never_read_as_a_dead_one(tmp_path: Path) -> None:
    journal = AnswerJournal(tmp_path / "journal")
    journal.answered(1.0, "s", None)
    assert dead_segments(tmp_path / "journal").paths == []
    die(journal)
    dead = dead_segments(tmp_path / "journal")
    assert len(dead.paths) == 1
    dead.release(delete=False)


def test_the_next_start_counts_the_answers_without_a_row_once(storage: Storage) -> None:
    home = storage.home
    project = home / "projects" / "abc" / "ember.db"
    db = storage.database(project)
    journal = AnswerJournal(journal_dir(home))
    for i in range(10):
        journal.answered(1000.0 + i / 7, f"s{i % 3}", project)
    for i in range(6):  # six rows made it to the file before the kill
        db.write(record(1000.0 + i / 7, f"s{i % 3}").insert)
    db.write(record(1000.0 + 9 / 7, "s1").insert)  # same time, another session: not it
    die(journal)

    lost = recount(storage, journal_dir(home))
    assert lost == {project: 4}
    assert db.health.lost_at_kill == 4 and db.health.reportable  # /healthz lists it
    assert read_problems(home)[str(project)]["lost_at_kill"] == 4  # `ember stats` says it
    assert list(journal_dir(home).iterdir()) == []
    assert recount(storage, journal_dir(home)) == {}  # never counted twice
    assert read_problems(home)[str(project)]["lost_at_kill"] == 4


def test_a_row_journaled_before_its_project_was_known_is_looked_for_where_it_went(
    storage: Storage,
) -> None:
    home = storage.home
    project = home / "projects" / "abc" / "ember.db"
    journal = AnswerJournal(journal_dir(home))
    journal.answered(5.5, "title", None)  # a title request: its session named no project yet
    journal.answered(6.5, "title", None)
    journal.moved(5.5, "title", project)  # held, then written to the project's file
    storage.database(project).write(record(5.5, "title").insert)
    journal.answered(7.5, "lonely", None)  # never named: its row would have gone to stats.db
    die(journal)

    lost = recount(storage, journal_dir(home))
    assert lost == {project: 1, stats_db_path(home): 1}

"""What `storage-problems.json` keeps: losses add up over processes and recoveries, never reset."""

from __future__ import annotations

from pathlib import Path

from ember.store.health import Health
from ember.store.problems import Reported, note_recovery, read_problems
from ember.store.recovered import RecoveryReport, TableReport


def health(db: Path, **kw: object) -> Health:
    return Health(str(db), **kw)  # type: ignore[arg-type]


def test_each_process_adds_what_it_lost_since_it_last_said(tmp_path: Path) -> None:
    db = tmp_path / "ember.db"
    first, second = Reported(), Reported()
    first.record(tmp_path, health(db, state="full", dropped=3, dropped_by=(("accounting", 3),)))
    # the same process reports again (back, then at its stop): its 3 are not added twice
    back = health(db, dropped=5, dropped_by=(("accounting", 4), ("ledger", 1)), was="full")
    first.record(tmp_path, back)
    first.record(tmp_path, back)
    # another proxy (or the next start) with losses of its own
    second.record(tmp_path, health(db, state="corrupt", dropped=2, dropped_by=(("accounting", 2),)))
    entry = read_problems(tmp_path)[str(db)]
    assert entry["dropped_by"] == {"accounting": 6, "ledger": 1}
    assert entry["dropped_writes"] == 7 and entry["state"] == "corrupt"
    # a later process whose file is fine keeps the earlier losses on record
    Reported().record(tmp_path, health(db))
    assert read_problems(tmp_path)[str(db)]["dropped_writes"] == 7


def test_a_database_that_never_lost_anything_leaves_no_entry(tmp_path: Path) -> None:
    db = tmp_path / "ember.db"
    told = Reported()
    told.record(tmp_path, health(db, state="full", held=4))
    assert read_problems(tmp_path)[str(db)]["held_writes"] == 4
    told.record(tmp_path, health(db, was="full", caught_up=4))
    assert read_problems(tmp_path) == {}


def test_a_recovery_keeps_the_earlier_losses_and_adds_the_rows_it_could_not_copy(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ember.db"
    Reported().record(
        tmp_path, health(db, state="corrupt", dropped=50, dropped_by=(("accounting", 50),))
    )
    report = RecoveryReport(db, db, kept_as=tmp_path / "ember.db.damaged-1")
    report.tables = {"exchanges": TableReport(copied=90, lost=7), "memories": TableReport(3, 0)}
    note_recovery(tmp_path, db, report)
    entry = read_problems(tmp_path)[str(db)]
    assert entry["state"] == "ok" and entry["was"] == "corrupt"
    assert entry["dropped_by"] == {"accounting": 50}  # not reset to 0 by the recovery
    assert entry["unrecovered_by"] == {"exchanges": 7} and entry["unrecovered_rows"] == 7
    # a second damage and recovery adds again
    note_recovery(tmp_path, db, report)
    assert read_problems(tmp_path)[str(db)]["unrecovered_rows"] == 14


def test_a_recovery_that_lost_nothing_of_a_file_that_lost_nothing_clears_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ember.db"
    Reported().record(tmp_path, health(db, state="corrupt"))
    report = RecoveryReport(db, db)
    report.tables = {"exchanges": TableReport(copied=90)}
    note_recovery(tmp_path, db, report)
    assert read_problems(tmp_path) == {}

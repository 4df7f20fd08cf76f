"""The savings ledger in stats.db: flush every 25, re-read the baseline before writing, merge;
the files of before read once and kept as .bak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.errors import StorageError
from ember.shaping.controller import ControllerState
from ember.shaping.recorder import FLUSH_EVERY, SavingsRecorder, read_state
from ember.shaping.savings import Ledger, build_report
from ember.shaping.state import ShapingState, load_controller, save_controller
from ember.stats import RunningStats
from tests.shaping.conftest import StateFor

DAY = 1_796_000_000.0  # a fixed instant: 2026-11-30 UTC
STRATUM = "new_ask|<2k|claude-sonnet|tools"


def recorder(state: ShapingState, **kw: object) -> SavingsRecorder:
    return SavingsRecorder(state, clock=lambda: DAY, **kw)  # type: ignore[arg-type]


def write_baseline(state: ShapingState, mean: float, *, level: int | None = None) -> None:
    """What ``ember learn --verbosity --apply`` does: rewrite the document."""
    data: dict[str, object] = {"baseline": {STRATUM: [10, mean, 90.0]}, "learned_by": "test"}
    if level is not None:
        data["level"] = level
    state.update("verbosity", lambda _: data)


def test_nothing_is_written_before_25_outcomes_and_everything_after(
    tmp_path: Path, state_for: StateFor
) -> None:
    state = state_for(tmp_path)
    rec = recorder(state)
    due = [rec.record("treatment", STRATUM, 100, 0.1) for _ in range(FLUSH_EVERY)]
    assert due == [False] * (FLUSH_EVERY - 1) + [True]
    assert state.read("ledger") is None
    rec.flush()
    stored = read_state(state)
    assert stored.ledger.treatment[STRATUM].n == FLUSH_EVERY
    assert stored.ledger.echo["treatment"].mean == pytest.approx(0.1)


def test_flush_rereads_the_baseline_and_never_overwrites_a_learned_one(
    tmp_path: Path, state_for: StateFor
) -> None:
    state = state_for(tmp_path)
    write_baseline(state, 100.0, level=3)
    rec = recorder(state)
    assert rec.baseline_mean(STRATUM) == 100.0
    # `ember learn --verbosity --apply` rewrites it while the proxy runs
    write_baseline(state, 300.0, level=1)
    rec.record_baseline("other|<2k|gpt-5|tools", 50)  # shaping-off traffic adds to it
    rec.flush()
    data = state.read("verbosity")
    assert data["baseline"][STRATUM] == [10, 300.0, 90.0]  # the learned baseline survived
    assert data["level"] == 1 and data["learned_by"] == "test"  # keys it does not own too
    assert data["baseline"]["other|<2k|gpt-5|tools"][0] == 1
    assert rec.baseline_mean(STRATUM) == 300.0 and rec.learned_level == 1  # and took effect


def test_estimates_for_the_day_use_the_baseline_in_force(
    tmp_path: Path, state_for: StateFor
) -> None:
    state = state_for(tmp_path)
    write_baseline(state, 100.0)
    rec = recorder(state)
    rec.record("treatment", STRATUM, 70, None)
    rec.record("treatment", STRATUM, 120, None)
    rec.record("control", STRATUM, 95, None)
    rec.flush()
    [(day, bucket)] = read_state(state).ledger.days.items()
    assert day == "2026-11-30"
    assert bucket.estimated_saved == pytest.approx(30 - 20)  # signed
    assert (bucket.treatment_requests, bucket.control_requests) == (2, 1)


def test_two_proxies_sharing_a_home_add_up(tmp_path: Path, state_for: StateFor) -> None:
    a, b = recorder(state_for(tmp_path)), recorder(state_for(tmp_path))
    for _ in range(3):
        a.record("treatment", STRATUM, 100, None)
    for _ in range(2):
        b.record("treatment", STRATUM, 40, None)
    a.flush()
    b.flush()
    a.flush()  # nothing pending: must not double count
    stats = read_state(state_for(tmp_path)).ledger.treatment[STRATUM]
    assert stats.n == 5 and stats.mean == pytest.approx((300 + 80) / 5)


def test_the_files_of_before_are_read_once_and_kept_as_bak(
    tmp_path: Path, state_for: StateFor
) -> None:
    """An upgrade loses nothing: the ledger, baseline and level the files held are what the
    database holds after the first flush, and the files are kept beside it."""
    old = tmp_path / "shaping"
    old.mkdir()
    before = Ledger()
    before.record("treatment", STRATUM, 50, None, "2026-11-29", 100.0)
    (old / "output_savings.json").write_text(json.dumps(before.to_json()))
    (old / "verbosity.json").write_text(json.dumps({"level": 2, "baseline": {}}))
    state = state_for(tmp_path)
    assert read_state(state).ledger.treatment[STRATUM].n == 1  # read before any write
    rec = recorder(state)
    assert rec.learned_level == 2
    rec.record("treatment", STRATUM, 10, None)
    rec.record_baseline(STRATUM, 80)
    rec.flush()
    stored = read_state(state)
    assert stored.ledger.treatment[STRATUM].n == 2 and stored.learned_level == 2
    assert not (old / "output_savings.json").exists()
    assert json.loads((old / "output_savings.json.bak").read_text()) == before.to_json()
    assert (old / "verbosity.json.bak").exists()
    rec.record("treatment", STRATUM, 10, None)
    rec.flush()  # read once: the .bak is never read again
    assert read_state(state).ledger.treatment[STRATUM].n == 3


def test_a_corrupt_file_of_before_is_set_aside_not_silently_dropped(
    tmp_path: Path, state_for: StateFor
) -> None:
    old = tmp_path / "shaping"
    old.mkdir()
    (old / "output_savings.json").write_text("{not json")
    state = state_for(tmp_path)
    rec = recorder(state)
    rec.record("treatment", STRATUM, 10, None)
    rec.flush()
    kept = list(old.glob("output_savings.json.bad-*"))
    assert len(kept) == 1 and kept[0].read_text() == "{not json"
    assert read_state(state).ledger.treatment[STRATUM].n == 1


def test_a_failed_flush_keeps_its_delta(tmp_path: Path, file_state_for: StateFor) -> None:
    state_for = file_state_for
    blocker = tmp_path / "home"
    blocker.write_text("a file where the directory should be")
    rec = recorder(state_for(blocker))
    rec.record("treatment", STRATUM, 10, None)
    with pytest.raises((OSError, StorageError)):
        rec.flush()
    assert rec.pending
    blocker.unlink()
    rec.state = state_for(tmp_path / "elsewhere")  # the next flush finds a database
    rec.flush()
    assert read_state(rec.state).ledger.treatment[STRATUM].n == 1


def test_ledger_json_round_trip_and_report() -> None:
    ledger = Ledger()
    for x in (60, 70, 80):
        ledger.record("treatment", STRATUM, x, 0.2, "2026-11-30", 100.0)
    for x in (90, 110):
        ledger.record("control", STRATUM, x, None, "2026-11-30", None)
    again = Ledger.from_json(json.loads(json.dumps(ledger.to_json())))
    assert again.to_json() == ledger.to_json()
    report = build_report(again, {STRATUM: RunningStats(10, 100.0, 900.0)})
    assert report.estimated.saved_tokens.value == pytest.approx(90.0)
    assert report.measured.saved_tokens.value == pytest.approx(3 * (100 - 70))
    assert (report.treatment_requests, report.control_requests) == (3, 2)
    with pytest.raises(ValueError):
        Ledger.from_json({"version": 99})


def test_a_flush_with_nothing_recorded_touches_no_database(tmp_path: Path) -> None:
    calls: list[str] = []

    def database() -> None:
        calls.append("opened")

    SavingsRecorder(ShapingState(tmp_path, database), clock=lambda: DAY).flush()
    assert calls == ["opened"]  # only the start-up read, which found no database


def test_under_heavy_traffic_flushes_are_spaced_but_nothing_is_lost(
    tmp_path: Path, state_for: StateFor
) -> None:
    now = [DAY]
    rec = SavingsRecorder(state_for(tmp_path), clock=lambda: now[0], min_interval=2.0)
    due = [rec.record("treatment", STRATUM, 100, None) for _ in range(FLUSH_EVERY)]
    assert due[-1] and not any(due[:-1])
    rec.flush()
    now[0] += 1.0  # 25 more within a second: not yet
    assert not any(rec.record("treatment", STRATUM, 100, None) for _ in range(FLUSH_EVERY))
    now[0] += 1.5
    assert rec.record("treatment", STRATUM, 100, None)
    rec.flush()
    total = sum(s.n for s in read_state(rec.state).ledger.treatment.values())
    assert total == 2 * FLUSH_EVERY + 1


def test_what_shaping_keeps_survives_a_restart(tmp_path: Path, state_for: StateFor) -> None:
    """The ledger, the baseline, the learned level and the controller are read back by the
    next process (a new owner of stats.db, or of the PostgreSQL store's ``ember_home``)."""
    state = state_for(tmp_path)
    write_baseline(state, 100.0, level=2)
    rec = recorder(state)
    rec.record("treatment", STRATUM, 70, None)
    rec.flush()
    save_controller(state, ControllerState(level=3, up_streak=1, observations=9))
    for storage in state_for.opened.values():
        storage.close()  # the proxy stops
    state_for.opened.clear()
    again = state_for(tmp_path)
    stored = read_state(again)
    assert stored.ledger.treatment[STRATUM].n == 1 and stored.learned_level == 2
    assert recorder(again).baseline_mean(STRATUM) == 100.0
    assert load_controller(again) == ControllerState(level=3, up_streak=1, observations=9)


def test_the_schema_refuses_a_document_that_is_not_json(
    tmp_path: Path, state_for: StateFor
) -> None:
    state = state_for(tmp_path)
    db = state._writer()
    with pytest.raises(Exception, match=r"(?i)check|constraint"):
        db.write(
            lambda c: c.execute(
                "INSERT INTO shaping_state (name, doc, updated_at) VALUES ('ledger', '{no', 0)"
            )
        )
    assert state.read("ledger") is None

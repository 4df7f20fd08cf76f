"""The savings ledger on disk: flush every 25, re-read the baseline before writing, merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.shaping.files import ShapingFiles
from ember.shaping.recorder import FLUSH_EVERY, SavingsRecorder, read_state
from ember.shaping.savings import Ledger, build_report
from ember.stats import RunningStats

DAY = 1_796_000_000.0  # a fixed instant: 2026-11-30 UTC
STRATUM = "new_ask|<2k|claude-sonnet|tools"


def recorder(home: Path, **kw: object) -> SavingsRecorder:
    return SavingsRecorder(ShapingFiles(home), clock=lambda: DAY, **kw)  # type: ignore[arg-type]


def write_baseline(home: Path, mean: float, *, level: int | None = None) -> None:
    files = ShapingFiles(home)
    files.directory.mkdir(parents=True, exist_ok=True)
    data: dict[str, object] = {"baseline": {STRATUM: [10, mean, 90.0]}, "learned_by": "test"}
    if level is not None:
        data["level"] = level
    files.verbosity.write_text(json.dumps(data))


def test_nothing_is_written_before_25_outcomes_and_everything_after(tmp_path: Path) -> None:
    rec = recorder(tmp_path)
    due = [rec.record("treatment", STRATUM, 100, 0.1) for _ in range(FLUSH_EVERY)]
    assert due == [False] * (FLUSH_EVERY - 1) + [True]
    assert not ShapingFiles(tmp_path).ledger.exists()
    rec.flush()
    state = read_state(ShapingFiles(tmp_path))
    assert state.ledger.treatment[STRATUM].n == FLUSH_EVERY
    assert state.ledger.echo["treatment"].mean == pytest.approx(0.1)


def test_flush_rereads_the_baseline_and_never_overwrites_a_learned_one(tmp_path: Path) -> None:
    write_baseline(tmp_path, 100.0, level=3)
    rec = recorder(tmp_path)
    assert rec.baseline_mean(STRATUM) == 100.0
    # `ember learn --verbosity --apply` rewrites the file while the proxy runs
    write_baseline(tmp_path, 300.0, level=1)
    rec.record_baseline("other|<2k|gpt-5|tools", 50)  # shaping-off traffic adds to it
    rec.flush()
    data = json.loads(ShapingFiles(tmp_path).verbosity.read_text())
    assert data["baseline"][STRATUM] == [10, 300.0, 90.0]  # the learned baseline survived
    assert data["level"] == 1 and data["learned_by"] == "test"  # keys it does not own too
    assert data["baseline"]["other|<2k|gpt-5|tools"][0] == 1
    assert rec.baseline_mean(STRATUM) == 300.0 and rec.learned_level == 1  # and took effect


def test_estimates_for_the_day_use_the_baseline_in_force(tmp_path: Path) -> None:
    write_baseline(tmp_path, 100.0)
    rec = recorder(tmp_path)
    rec.record("treatment", STRATUM, 70, None)
    rec.record("treatment", STRATUM, 120, None)
    rec.record("control", STRATUM, 95, None)
    rec.flush()
    [(day, bucket)] = read_state(ShapingFiles(tmp_path)).ledger.days.items()
    assert day == "2026-11-30"
    assert bucket.estimated_saved == pytest.approx(30 - 20)  # signed
    assert (bucket.treatment_requests, bucket.control_requests) == (2, 1)


def test_two_proxies_sharing_a_home_add_up(tmp_path: Path) -> None:
    a, b = recorder(tmp_path), recorder(tmp_path)
    for _ in range(3):
        a.record("treatment", STRATUM, 100, None)
    for _ in range(2):
        b.record("treatment", STRATUM, 40, None)
    a.flush()
    b.flush()
    a.flush()  # nothing pending: must not double count
    stats = read_state(ShapingFiles(tmp_path)).ledger.treatment[STRATUM]
    assert stats.n == 5 and stats.mean == pytest.approx((300 + 80) / 5)


def test_a_corrupt_ledger_is_set_aside_not_silently_overwritten(tmp_path: Path) -> None:
    files = ShapingFiles(tmp_path)
    files.directory.mkdir(parents=True)
    files.ledger.write_text("{not json")
    rec = recorder(tmp_path)
    rec.record("treatment", STRATUM, 10, None)
    rec.flush()
    kept = list(files.directory.glob("output_savings.json.bad-*"))
    assert len(kept) == 1 and kept[0].read_text() == "{not json"
    assert read_state(files).ledger.treatment[STRATUM].n == 1


def test_a_failed_flush_keeps_its_delta(tmp_path: Path) -> None:
    blocker = tmp_path / "home"
    blocker.write_text("a file where the directory should be")
    rec = SavingsRecorder(ShapingFiles(blocker), clock=lambda: DAY)
    rec.record("treatment", STRATUM, 10, None)
    with pytest.raises(OSError):
        rec.flush()
    blocker.unlink()
    rec.flush()
    assert read_state(ShapingFiles(blocker)).ledger.treatment[STRATUM].n == 1


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


def test_a_flush_with_nothing_recorded_touches_no_file(tmp_path: Path) -> None:
    recorder(tmp_path).flush()
    assert not (tmp_path / "shaping").exists()


def test_under_heavy_traffic_flushes_are_spaced_but_nothing_is_lost(tmp_path: Path) -> None:
    now = [DAY]
    rec = SavingsRecorder(ShapingFiles(tmp_path), clock=lambda: now[0], min_interval=2.0)
    due = [rec.record("treatment", STRATUM, 100, None) for _ in range(FLUSH_EVERY)]
    assert due[-1] and not any(due[:-1])
    rec.flush()
    now[0] += 1.0  # 25 more within a second: not yet
    assert not any(rec.record("treatment", STRATUM, 100, None) for _ in range(FLUSH_EVERY))
    now[0] += 1.5
    assert rec.record("treatment", STRATUM, 100, None)
    rec.flush()
    total = sum(s.n for s in read_state(ShapingFiles(tmp_path)).ledger.treatment.values())
    assert total == 2 * FLUSH_EVERY + 1

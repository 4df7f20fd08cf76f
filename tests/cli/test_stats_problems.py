"""What `ember stats` says of a database a proxy switched off: held, lost, and what to do."""

from __future__ import annotations

from ember.cli.stats import problem_line


def test_while_off_it_says_what_is_held_and_what_was_lost() -> None:
    line = problem_line(
        {
            "state": "full",
            "detail": "the disk is full",
            "held_writes": 40,
            "dropped_writes": 15,
            "dropped_by": {"accounting": 12, "transcript": 3},
            "fix": "Free some space; ember retries on its own.",
        }
    )
    assert "40 writes are held in memory" in line and "12 accounting, 3 transcript" in line
    assert "12 requests are missing from the totals" in line and line.endswith("on its own.")


def test_back_with_losses_and_damaged_say_so() -> None:
    back = problem_line(
        {"state": "ok", "was": "full", "dropped_writes": 2, "dropped_by": {"transcript": 2}}
    )
    assert "is back" in back and "2 transcript" in back and "missing" not in back
    damaged = problem_line({"state": "corrupt", "detail": "bad WAL frame", "dropped_by": {}})
    assert "damaged (bad WAL frame)" in damaged and "ember doctor --recover" in damaged


def test_after_a_recovery_and_a_kill_every_count_adds_to_the_missing_requests() -> None:
    line = problem_line(
        {
            "state": "ok",
            "was": "corrupt",
            "recovered_at": 1_800_000_000.0,
            "dropped_writes": 55,
            "dropped_by": {"accounting": 50, "transcript": 5},
            "unrecovered_rows": 9,
            "unrecovered_by": {"exchanges": 7, "memories": 2},
            "lost_at_kill": 2,
        }
    )
    assert "rebuilt by `ember doctor --recover`" in line
    assert "55 writes were lost (50 accounting, 5 transcript)" in line
    assert "2 answered requests have no accounting row" in line
    assert "9 rows could not be recovered (7 exchanges, 2 memories)" in line
    assert "59 requests are missing from the totals" in line  # 50 + 2 + 7
    killed = problem_line({"state": "ok", "lost_at_kill": 3})
    assert killed.startswith("warning: 3 answered requests have no accounting row")

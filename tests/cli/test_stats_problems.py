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

"""``ember output-savings`` as a user runs it: both numbers labelled, bands, chart, JSON."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

from ember.shaping.recorder import SavingsRecorder
from ember.shaping.state import ShapingState
from ember.stats import Z95
from ember.store.registry import Storage

EMBER = str(Path(sys.executable).with_name("ember"))
ASK = "new_ask|8k-32k|claude-sonnet|tools"
DAY1, DAY2 = 1_796_000_000.0, 1_796_000_000.0 + 86_400  # 2026-11-30 and 2026-12-01 UTC


def run(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    return subprocess.run(
        [EMBER, "output-savings", *args],
        env={**base, "EMBER_HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def fill(home: Path) -> None:
    """Known samples: a baseline of 100/200/300 (mean 200), shaped 150/170 on day 1 and
    220/240 on day 2, holdout 200/240."""
    now = [DAY1]
    storage = Storage(home, vec=False)  # the home's stats.db, closed before the CLI reads it
    rec = SavingsRecorder(ShapingState(home, storage.stats), clock=lambda: now[0])
    for x in (100, 200, 300):
        rec.record_baseline(ASK, x)
    rec.flush()  # the baseline is in force from here on
    rec.record("treatment", ASK, 150, 0.5)
    rec.record("treatment", ASK, 170, None)
    now[0] = DAY2
    rec.record("treatment", ASK, 220, 0.0)
    rec.record("treatment", ASK, 240, None)
    rec.record("control", ASK, 200, None)
    rec.record("control", ASK, 240, None)
    rec.flush()
    storage.close()


def test_help_explains_both_numbers_and_the_holdout(tmp_path: Path) -> None:
    out = run(tmp_path, "--help").stdout
    assert "estimated" in out and "measured" in out and "EMBER_OUTPUT_HOLDOUT=0.1" in out


def test_without_data_it_says_how_to_get_each_number(tmp_path: Path) -> None:
    r = run(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "estimated" in r.stdout and "No baseline yet" in r.stdout
    assert "measured" in r.stdout and "EMBER_OUTPUT_HOLDOUT=0.1" in r.stdout


def test_json_numbers_match_the_samples(tmp_path: Path) -> None:
    fill(tmp_path)
    r = run(tmp_path, "--json", EMBER_OUTPUT_HOLDOUT="0.1")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    shaped = [150, 170, 220, 240]
    est = data["estimated"]
    assert est["label"] == "estimated" and est["available"]
    assert est["saved_output_tokens"]["value"] == 4 * 200 - sum(shaped) == 20
    half = Z95 * math.sqrt(statistics.variance([100, 200, 300]) * (4 + 16 / 3))
    assert math.isclose(est["saved_output_tokens"]["high"], 20 + half)
    measured = data["measured"]
    assert measured["label"] == "measured" and measured["requests"] == 4
    assert math.isclose(measured["saved_output_tokens"]["value"], 4 * (220 - 195))
    var = 16 * (statistics.variance([200, 240]) / 2 + statistics.variance(shaped) / 4)
    assert math.isclose(measured["saved_output_tokens"]["low"], 100 - Z95 * math.sqrt(var))
    assert data["how_to_measure"] is None and data["holdout"] == 0.1
    assert data["echo_ratio"]["treatment"] == {"mean": 0.25, "answers": 2}
    days = {d["day"]: d for d in data["days"]}
    assert days["2026-11-30"]["estimated_saved"] == 80.0
    assert days["2026-12-01"]["estimated_saved"] == -60.0


def test_text_labels_both_numbers_and_charts_a_loss_as_a_loss(tmp_path: Path) -> None:
    fill(tmp_path)
    out = run(tmp_path).stdout
    [estimated] = [line for line in out.splitlines() if "+20 output tokens" in line]
    [measured] = [line for line in out.splitlines() if "+100 output tokens" in line]
    lines = out.splitlines()
    assert lines[lines.index(estimated) - 1].startswith("estimated")
    assert lines[lines.index(measured) - 1].startswith("measured")
    assert "95% band" in out
    assert "EMBER_OUTPUT_HOLDOUT=0.1" in out  # holdout off in these settings: say how
    [day1] = [line for line in out.splitlines() if "2026-11-30" in line]
    [day2] = [line for line in out.splitlines() if "2026-12-01" in line]
    assert "█" in day1 and "+80" in day1
    assert "-" * 10 in day2 and "█" not in day2 and "-60" in day2


def test_a_corrupt_ledger_of_before_is_reported_with_its_path(tmp_path: Path) -> None:
    """A home whose proxy has not run since the upgrade: the report reads the old file."""
    old = ShapingState(tmp_path, None).legacy("ledger")
    old.parent.mkdir(parents=True)
    old.write_text("{oops")
    r = run(tmp_path)
    assert r.returncode == 1
    assert str(old) in r.stderr and "Move the file aside" in r.stderr
    assert "Traceback" not in r.stderr

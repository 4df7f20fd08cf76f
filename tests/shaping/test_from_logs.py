"""``learn --verbosity``: behaviour in the logs -> a level (never above 3) and the baseline
``ember output-savings`` measures shaped answers against."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ember.shaping.from_logs import (
    MAX_LEARNED_LEVEL,
    VerbosityReport,
    learn_verbosity,
    save_verbosity,
    shaping_started,
)
from ember.shaping.recorder import SavingsRecorder, read_state
from ember.strata import stratum_key
from tests.shaping.conftest import StateFor

T0 = 1_790_000_000.0
LONG = "word " * 600  # ~750 tokens: a skim takes ~47 s
EMBER = str(Path(sys.executable).with_name("ember"))


@dataclass(frozen=True)
class Msg:
    role: str
    timestamp: float | None = None
    parts: Sequence[str] = ("text",)
    text: str = ""
    interrupted: bool = False
    model: str | None = None
    output_tokens: int | None = None
    input_tokens: int | None = None

    @property
    def chars(self) -> int:
        return len(self.text)


@dataclass(frozen=True)
class Session:
    messages: Sequence[Msg] = field(default_factory=tuple)


def exchange(t: float, reply_after: float, reply: str = "next task", **kw: object) -> list[Msg]:
    """A user ask, a long answer at ``t``, the user's next message ``reply_after`` s later."""
    return [
        Msg("user", t - 1, text="do it"),
        Msg(
            "assistant",
            t,
            text=LONG,
            model="claude-sonnet-4-5",
            output_tokens=700,
            input_tokens=5000,
        ),
        Msg("user", t + reply_after, text=reply, **kw),  # type: ignore[arg-type]
    ]


def session(*turns: list[Msg]) -> Session:
    return Session(tuple(m for turn in turns for m in turn))


def test_fast_replies_and_interrupts_raise_the_level_but_never_above_3() -> None:
    turns = [exchange(T0 + i * 1000, 3.0) for i in range(20)]  # every answer skipped
    turns += [
        exchange(T0 + 50_000 + i * 1000, 0.5, "[Request interrupted by user]", interrupted=True)
        for i in range(20)
    ]
    report = learn_verbosity([session(*turns)])
    assert report.signals.fast_skips == 20 and report.signals.interrupts == 20
    assert report.level == MAX_LEARNED_LEVEL == 3


def test_slow_readers_get_a_light_touch() -> None:
    report = learn_verbosity([session(*[exchange(T0 + i * 1000, 300.0) for i in range(25)])])
    assert report.signals.new_asks == 25 and report.signals.fast_skips == 0
    assert report.level == 1


def test_some_pressure_gives_the_middle_level() -> None:
    turns = [exchange(T0 + i * 1000, 300.0) for i in range(16)]
    turns += [exchange(T0 + 90_000 + i * 1000, 2.0) for i in range(4)]  # 20% skipped
    assert learn_verbosity([session(*turns)]).level == 2


def test_asks_for_more_detail_hold_the_level_down() -> None:
    turns = [exchange(T0 + i * 1000, 2.0) for i in range(16)]
    turns += [exchange(T0 + 90_000 + i * 1000, 60, "can you explain more?") for i in range(4)]
    report = learn_verbosity([session(*turns)])
    assert report.signals.asked_for_more == 4 and report.level == 1


def test_too_few_observations_give_no_level() -> None:
    report = learn_verbosity([session(*[exchange(T0 + i * 1000, 1.0) for i in range(5)])])
    assert report.signals.fast_skips == 5 and report.level is None


def test_stopping_a_tool_call_and_replying_to_a_short_answer_are_not_signals() -> None:
    msgs = [
        Msg("user", T0, text="fix it"),
        Msg("assistant", T0 + 1, parts=("tool_use",), output_tokens=30, input_tokens=900),
        Msg("user", T0 + 2, text="[Request interrupted by user for tool use]", interrupted=True),
        Msg("user", T0 + 3, text="try again"),
        Msg("assistant", T0 + 4, text="Done.", output_tokens=3, input_tokens=900),
        Msg("user", T0 + 5, text="thanks"),  # a glance is enough for "Done."
    ]
    s = learn_verbosity([Session(tuple(msgs))]).signals
    assert (s.interrupts, s.fast_skips, s.new_asks) == (0, 0, 1)


def test_the_baseline_is_stratified_like_the_proxy_and_leaves_out_shaped_answers() -> None:
    msgs = [
        Msg("user", T0, text="ask"),
        Msg(
            "assistant",
            T0 + 1,
            parts=("text", "tool_use"),
            text="reading",
            model="claude-sonnet-4-5-20250929",
            output_tokens=40,
            input_tokens=3000,
        ),
        Msg("user", T0 + 2, parts=("tool_result",)),
        Msg(
            "assistant",
            T0 + 3,
            text="answer",
            model="claude-sonnet-4-5",
            output_tokens=400,
            input_tokens=3100,
        ),
        Msg("user", T0 + 10_000, text="later"),
        Msg(
            "assistant",
            T0 + 10_001,
            text="shaped",
            model="claude-sonnet-4-5",
            output_tokens=50,
            input_tokens=3100,
        ),
    ]
    report = learn_verbosity([Session(tuple(msgs))], shaped_since=T0 + 5_000)
    ask = stratum_key("new_ask", 3000 * 4, "claude-sonnet-4-5", True)
    cont = stratum_key("mechanical_continuation", 3100 * 4, "claude-sonnet-4-5", True)
    assert {k: (v.n, v.mean) for k, v in report.baseline.items()} == {
        ask: (1, 40.0),
        cont: (1, 400.0),
    }
    assert report.baseline_answers == 2


def _report_with(strata: dict[str, list[int]], level: int | None = 2) -> VerbosityReport:
    from ember.stats import RunningStats

    report = VerbosityReport(level=level)
    for key, xs in strata.items():
        stats = RunningStats()
        for x in xs:
            stats.add(x)
        report.baseline[key] = stats
    return report


ASK = "new_ask|8k-32k|claude-sonnet|tools"
CONT = "mechanical_continuation|<2k|claude-sonnet|tools"


def test_saved_through_shapings_state_the_proxy_reads_level_and_baseline(
    tmp_path: Path, state_for: StateFor
) -> None:
    files = state_for(tmp_path)
    rec = SavingsRecorder(files)
    rec.record_baseline(CONT, 90)  # the proxy, shaping off
    rec.flush()
    save_verbosity(files, _report_with({ASK: [100, 200, 300]}, level=3))
    state = read_state(files)
    assert state.learned_level == 3
    assert state.baseline[ASK].mean == pytest.approx(200) and state.baseline[CONT].n == 1
    rec.reload()
    assert rec.baseline_mean(ASK) == pytest.approx(200) and rec.learned_level == 3
    rec.record_baseline(CONT, 110)  # a later proxy flush keeps what learn wrote
    rec.flush()
    state = read_state(files)
    assert state.baseline[ASK].n == 3 and state.baseline[CONT].n == 2


def test_learning_again_swaps_its_own_part_instead_of_adding_it(
    tmp_path: Path, state_for: StateFor
) -> None:
    files = state_for(tmp_path)
    rec = SavingsRecorder(files)
    for x in (50, 70):
        rec.record_baseline(ASK, x)  # the proxy's share of the same stratum
    rec.flush()
    save_verbosity(files, _report_with({ASK: [100, 200, 300]}))
    first = read_state(files).baseline
    save_verbosity(files, _report_with({ASK: [100, 200, 300]}))
    assert read_state(files).baseline == first  # idempotent, exactly
    save_verbosity(files, _report_with({ASK: [400]}))  # new logs: the old share goes
    b = read_state(files).baseline[ASK]
    assert b.n == 3 and b.mean == pytest.approx((50 + 70 + 400) / 3)
    assert b.m2 == pytest.approx(sum((x - b.mean) ** 2 for x in (50, 70, 400)))


def test_no_level_keeps_the_one_already_learned(tmp_path: Path, state_for: StateFor) -> None:
    files = state_for(tmp_path)
    save_verbosity(files, _report_with({}, level=2))
    save_verbosity(files, _report_with({ASK: [10]}, level=None))
    assert read_state(files).learned_level == 2


def test_an_unreadable_file_is_set_aside_not_overwritten(
    tmp_path: Path, state_for: StateFor
) -> None:
    files = state_for(tmp_path)
    files.directory.mkdir(parents=True)
    files.legacy("verbosity").write_text("{not json")  # a file of before the database
    save_verbosity(files, _report_with({ASK: [10]}))
    kept = list(files.directory.glob("verbosity.json.bad-*"))
    assert len(kept) == 1 and kept[0].read_text() == "{not json"
    assert read_state(files).baseline[ASK].n == 1


def test_shaping_start_comes_from_the_ledger_and_is_remembered(
    tmp_path: Path, state_for: StateFor
) -> None:
    files = state_for(tmp_path)
    assert shaping_started(files) is None
    rec = SavingsRecorder(files, clock=lambda: 1_796_000_000.0 + 3600)  # 2026-11-30
    rec.record("treatment", ASK, 100, None)
    rec.flush()
    start = shaping_started(files)
    assert start == 1_795_996_800.0  # midnight UTC of the first shaped day
    report = _report_with({})
    report.shaped_since = start
    save_verbosity(files, report)
    db = files._database() if files._database is not None else None
    assert db is not None
    db.write(lambda c: c.execute("DELETE FROM shaping_state WHERE name = 'ledger'"))
    # the ledger's window moved on; the date is still known
    assert shaping_started(files) == start


def test_output_savings_estimates_against_the_learned_baseline(
    tmp_path: Path, state_for: StateFor
) -> None:
    files = state_for(tmp_path)
    save_verbosity(files, _report_with({ASK: [300, 320, 340]}))
    rec = SavingsRecorder(files)
    for x in (100, 120, 140):
        rec.record("treatment", ASK, x, None)
    rec.flush()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    out = subprocess.run(
        [EMBER, "output-savings", "--json"],
        env={**env, "EMBER_HOME": str(tmp_path), **state_for.env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    est = json.loads(out)["estimated"]
    assert est["available"] and est["saved_output_tokens"]["value"] == pytest.approx(600)

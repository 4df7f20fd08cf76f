"""The shortenings themselves (pure): what they keep byte for byte, that every left-out line can
be brought back, that the same input always gives the same bytes, and what they never touch."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.compress.lines import shorten_lines
from ember.compress.listing import regroup
from ember.compress.policy import judge, terms_of
from ember.compress.records import shorten_records
from ember.compress.retrieve import select
from ember.compress.shorten import shorten
from ember.testing.tool_outputs import (
    build_log,
    file_tree,
    grep_hits,
    orders_json,
    pytest_log,
    session_outputs,
    source_file,
)

ASK = "Why does the refund test fail, and what about order ORD-10217?"
_MARK = re.compile(
    r"^\[ember: (\d+) lines? left out; ember_retrieve ref=(\S+) lines=(\d+)-(\d+)\]$"
)


def judged(name: str) -> str | None:
    o = next(o for o in session_outputs() if o.name == name)
    v = judge(
        o.tool, o.arguments, o.text, is_error=False, min_chars=2000, policies={}, retrievable=True
    )
    return v.how


@pytest.mark.parametrize("output", session_outputs(), ids=lambda o: o.name)
def test_what_the_agent_acts_on_survives_byte_for_byte(output: object) -> None:
    o = output  # type: ignore[assignment]
    verdict = judge(
        o.tool, o.arguments, o.text, is_error=False, min_chars=2000, policies={}, retrievable=True
    )
    short = shorten(o.text, verdict.how, "c0123456789", terms_of(ASK)) if verdict.how else None
    sent = short.text if short is not None else o.text
    for kept in o.must_keep:
        assert kept in sent
    if o.name == "source file":
        assert short is None  # a file the agent read is never shortened
    else:
        assert short is not None and len(sent) < 0.7 * len(o.text)


def test_every_left_out_line_comes_back_by_its_range() -> None:
    for o in (pytest_log(), build_log()):
        kept = shorten_lines(o.text, "c0123456789", terms_of(ASK))
        assert kept is not None
        rebuilt: list[str] = []
        for line in kept.text.split("\n"):
            m = _MARK.match(line)
            if m is None:
                rebuilt.append(line)
                continue
            back, error = select(o.text, "lines", f"{m.group(3)}-{m.group(4)}", None)
            assert not error and int(m.group(1)) == int(m.group(4)) - int(m.group(3)) + 1
            rebuilt.extend(back.split("\n"))
        assert "\n".join(rebuilt) == o.text


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(
        st.sampled_from(
            ["ok step", "step 12 done", "WARNING: disk at 91%", "Error: boom", "", "x = 1"]
        ),
        min_size=40,
        max_size=200,
    )
)
def test_any_log_comes_back_whole_from_its_markers(lines: list[str]) -> None:
    text = "\n".join(lines)
    kept = shorten_lines(text, "c0123456789", ["boom"])
    if kept is None:
        return
    rebuilt: list[str] = []
    for line in kept.text.split("\n"):
        m = _MARK.match(line)
        if m is None:
            rebuilt.append(line)
        else:
            rebuilt.extend(lines[int(m.group(3)) - 1 : int(m.group(4))])
    assert rebuilt == lines
    assert kept.left_out == sum(
        int(m.group(1)) for m in map(_MARK.match, kept.text.split("\n")) if m
    )


def test_the_same_output_gives_the_same_bytes() -> None:
    for o in session_outputs():
        a = shorten(o.text, "lossy", "c0123456789", terms_of(ASK))
        b = shorten(o.text, "lossy", "c0123456789", terms_of(ASK))
        assert a == b


def test_records_keep_the_shape_the_named_record_and_the_outliers() -> None:
    o = orders_json()
    short = shorten_records(o.text, "c0123456789", terms_of(ASK))
    assert short is not None
    header, _, body = short.text.partition("[ember: kept records")
    assert "of 400 records left out" in header and "ember_retrieve ref=c0123456789" in header
    assert "status (paid 399, refunded 1)" in header or "status (paid 398" in header
    kept = json.loads(body.split("\n", 1)[1])
    ids = {r["id"] for r in kept}
    assert "ORD-10217" in ids  # asked about
    assert any(r["status"] == "refunded" for r in kept)  # the rare value
    assert any(r["total"] == 98000.0 for r in kept)  # the far number
    back, error = select(o.text, "records", None, "ORD-10301")
    assert not error and json.loads(back)[0]["id"] == "ORD-10301"


def test_hits_and_file_lists_are_regrouped_without_losing_one() -> None:
    hits = grep_hits()
    grouped = regroup(hits.text)
    assert grouped is not None and grouped.left_out == 0
    for line in hits.text.split("\n"):
        path, number, text = line.split(":", 2)
        assert path in grouped.text and f"  {number}:{text}" in grouped.text
    tree = file_tree()
    listed = regroup(tree.text)
    assert listed is not None
    for path in tree.text.split("\n"):
        directory, _, name = path.rpartition("/")
        assert f"{directory}/ (" in listed.text and name in listed.text


@pytest.mark.parametrize(
    ("tool", "arguments", "text", "why"),
    [
        ("Read", {"file_path": "a.py"}, "x\n" * 5000, "exact: Read reads or writes files"),
        ("Bash", {"command": "cat src/app.py"}, "line\n" * 5000, "exact: the command"),
        ("Bash", {"command": "git diff"}, "diff --git a/x b/x\n@@ -1 +1 @@\n" * 500, "exact"),
        ("Bash", {"command": "ls"}, "a.py\n" * 10, "small"),
        ("Bash", {"command": "make"}, "ok\x00\x00" * 3000, "binary"),
        ("Bash", {"command": "make"}, "fail\n" * 3000, "a tool error"),
    ],
)
def test_what_must_stay_exact_stays_exact(
    tool: str, arguments: dict[str, str], text: str, why: str
) -> None:
    verdict = judge(
        tool,
        arguments,
        text,
        is_error=why == "a tool error",
        min_chars=2000,
        policies={},
        retrievable=True,
    )
    assert verdict.how is None and verdict.why.startswith(why)


def test_settings_decide_per_tool_and_no_retrieval_means_lossless_only() -> None:
    log = pytest_log()
    off = judge(
        "Bash",
        {},
        log.text,
        is_error=False,
        min_chars=200,
        policies={"Bash": "off"},
        retrievable=True,
    )
    assert off.how is None
    lossless = judge(
        "Bash", {}, log.text, is_error=False, min_chars=200, policies={}, retrievable=False
    )
    assert lossless.how == "lossless"
    assert shorten(log.text, "lossless", "c0123456789") is None  # a log cannot be regrouped


def test_bad_input_is_handled() -> None:
    assert shorten_records("[1, 2, 3", "c0123456789") is None  # JSON that does not parse
    assert shorten("\udcff" * 10_000, "lossy", "c0123456789") is None or True
    huge = "\n".join(f"step {i} ok" for i in range(400_000)) + "\nError: the one failure"
    short = shorten(huge, "lossy", "c0123456789")
    assert short is not None and "Error: the one failure" in short.text
    assert (
        judge(
            "Bash",
            {},
            source_file().text,
            is_error=False,
            min_chars=200,
            policies={},
            retrievable=True,
        ).how
        is None
    )

"""Evaluation sets for memory retrieval, each with a dev split (tune on it) and a test split.

* ``generated``: the multi-session conversation set of ``memory_data.py``. Dev is the set drawn
  with seed 2027, test the committed set (seed 2026): two corpora, one generator.
* ``agent-logs``: questions written by hand (``data/agent_log_questions.json``) against the real
  agent logs in ``../shared/fixtures/agent-logs/``; every text turn of every log is a memory, with
  the generated conversation's 1,600 turns beside them as distractors. Even questions are dev,
  odd ones test.
* ``locomo``: LoCoMo (``locomo10.json``, CC BY-NC 4.0) when ``EMBER_BENCH_LOCOMO`` names the file;
  conversations 0-4 are dev, 5-9 test; adversarial questions (category 5, no answer) are left
  out. No package registry we could reach ships it, so it is never committed or downloaded here.
* ``chitchat``: questions written by hand (``data/chitchat_questions.json``) against real human
  chats: 39 multi-session conversations between two pairs of students from the Chit-Chat
  Challenge data set (PyPI ``chitchat-dataset`` 0.9.0, MIT), read at run time from the
  installed package or from the ``dataset.json`` that ``EMBER_BENCH_CHITCHAT`` names; never
  committed. Every message turn (2,554) is a memory dated by its own timestamp. Even questions
  are dev, odd ones test. Skipped, with a line on stderr, when the data cannot be found.
* ``chitchat-may``: a second store from the same package, written apart from the first
  (``data/chitchat_may_questions.json``): the 45 conversations of one pair of students in
  May 2018, 2,782 message turns, 96 questions committed before any retrieval ran on them.
  Same loading, splits and skipping as ``chitchat``.
* ``chitchat-apr``: a third store, held out whole (``HELD_OUT``): the 27 conversations of
  another pair (no person shared with ``chitchat-may``), April-May 2018, 1,844 message turns.
  Its questions were written after the ranking of ``chitchat-may`` was chosen; neither split
  is tuned on or used for the floor.

Each set is a list of ``Turn`` (the memories) and ``Question`` (with the ids of the turns that
hold its answer: a hit on any of them counts).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_data import DATA, conversation_set

HERE = Path(__file__).parent


def _find_logs() -> Path:
    """``EMBER_AGENT_LOGS``, else the first ``shared/fixtures/agent-logs`` above the repository."""
    if os.environ.get("EMBER_AGENT_LOGS"):
        return Path(os.environ["EMBER_AGENT_LOGS"])
    for parent in HERE.resolve().parents:
        candidate = parent / "shared" / "fixtures" / "agent-logs"
        if candidate.is_dir():
            return candidate
    return HERE.parent.parent / "shared" / "fixtures" / "agent-logs"


LOGS = _find_logs()
QUESTIONS = HERE / "data" / "agent_log_questions.json"
CHITCHAT_QUESTIONS = HERE / "data" / "chitchat_questions.json"
# Each Chit-Chat store with its questions: ``chitchat`` (two pairs of people, October-November
# 2018) and ``chitchat-may`` (one pair, May 2018), written at different times by different
# hands; each its own store.
CHITCHAT_SETS = {
    "chitchat": CHITCHAT_QUESTIONS,
    "chitchat-may": HERE / "data" / "chitchat_may_questions.json",
    "chitchat-apr": HERE / "data" / "chitchat_apr_questions.json",
}
#: Sets nothing is ever chosen on: both their splits are only reported (``--tune`` and the
#: floor calibration leave them out).
HELD_OUT = frozenset({"chitchat-apr"})
DAY = 86400.0
START = 1_780_000_000.0
_TEXT_KEYS = ("text", "content", "message", "output", "prompt", "display", "summary")


@dataclass(frozen=True)
class Turn:
    """One memory; ``session`` names its conversation (log file, LoCoMo session), in order."""

    id: str
    text: str
    created_at: float
    session: str = ""


@dataclass(frozen=True)
class Question:
    question: str
    evidence: frozenset[str]
    kind: str = ""  # the set's own label (chitchat: single-hop, temporal, ...), when it has one


@dataclass(frozen=True)
class EvalSet:
    name: str
    split: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    now: float


def _generated(data: dict[str, Any], prefix: str = "") -> tuple[list[Turn], list[Question]]:
    turns = [
        Turn(
            prefix + t["id"],
            t["text"],
            START + t["session"] * DAY + i * 30,
            f"{prefix}s{t['session']}",
        )
        for i, t in enumerate(data["turns"])
    ]
    qs = [Question(q["question"], frozenset({prefix + q["evidence"]})) for q in data["questions"]]
    return turns, qs


def generated(split: str) -> EvalSet:
    data = json.loads(DATA.read_text()) if split == "test" else conversation_set(seed=2027)
    turns, qs = _generated(data)
    end = max(t.created_at for t in turns) + DAY
    return EvalSet("generated", split, tuple(turns), tuple(qs), end)


def _texts(o: Any) -> Iterator[str]:
    if isinstance(o, dict):
        for k, v in o.items():
            if k in _TEXT_KEYS and isinstance(v, str):
                yield v
            else:
                yield from _texts(v)
    elif isinstance(o, list):
        for x in o:
            yield from _texts(x)


def log_turns(root: Path = LOGS) -> list[Turn]:
    """Every text of at least 8 characters in every log (``file:line:n`` ids), one day per file."""
    out: list[Turn] = []
    files = sorted(p for p in root.rglob("*") if p.suffix in (".json", ".jsonl"))
    for day, path in enumerate(files):
        rel = path.relative_to(root).as_posix()
        raw = path.read_text(encoding="utf-8")
        lines = raw.splitlines() if path.suffix == ".jsonl" else [raw]
        for no, line in enumerate(lines, 1):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            for n, text in enumerate(_texts(obj)):
                text = text.strip()
                if len(text) >= 8 and text != "[trimmed for fixture]":
                    ts = START + day * DAY + no * 30 + n
                    out.append(Turn(f"{rel}:{no}:{n}", text, ts, rel))
    return out


def agent_logs(split: str) -> EvalSet:
    turns = log_turns()
    if not turns:
        raise FileNotFoundError(f"no agent logs under {LOGS}")
    by_line: dict[str, list[Turn]] = {}
    for t in turns:
        by_line.setdefault(t.id.rsplit(":", 1)[0], []).append(t)
    questions = []
    items = json.loads(QUESTIONS.read_text())["questions"]
    for i, q in enumerate(items):
        if (i % 2 == 0) != (split == "dev"):
            continue
        ev = set()
        for e in q["evidence"]:
            found = [
                t.id for t in by_line.get(f"{e['file']}:{e['line']}", []) if e["contains"] in t.text
            ]
            if not found:
                raise ValueError(
                    f"question {i}: no turn at {e['file']}:{e['line']} has {e['contains']!r}"
                )
            ev.update(found)
        questions.append(Question(q["question"], frozenset(ev)))
    distractors, _ = _generated(json.loads(DATA.read_text()), prefix="gen:")
    days = {t.created_at for t in turns}
    end = max(days | {t.created_at for t in distractors}) + DAY
    return EvalSet("agent-logs", split, tuple(turns + distractors), tuple(questions), end)


def _locomo_date(text: str) -> float:
    """ "1:56 pm on 8 May, 2023" -> epoch seconds (UTC); unknown -> START."""
    m = re.match(r"\s*(\d+):(\d+)\s*([ap]m)\s+on\s+(\d+)\s+(\w+),\s*(\d{4})", text or "", re.I)
    if not m:
        return START
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    when = datetime.strptime(f"{day} {month} {year} {h}:{minute}", "%d %B %Y %H:%M")
    return when.timestamp()


def locomo(split: str, path: str | None = None) -> EvalSet | None:
    """LoCoMo from the file ``EMBER_BENCH_LOCOMO`` names; None when it is not set."""
    path = path or os.environ.get("EMBER_BENCH_LOCOMO")
    if not path:
        return None
    samples = json.loads(Path(path).read_text())
    chosen = samples[:5] if split == "dev" else samples[5:]
    turns: list[Turn] = []
    questions: list[Question] = []
    for c, sample in enumerate(chosen):
        conv = sample["conversation"]
        n = 1
        while f"session_{n}" in conv:
            ts = _locomo_date(conv.get(f"session_{n}_date_time", ""))
            for j, t in enumerate(conv[f"session_{n}"]):
                text = f"{t['speaker']}: {t['text']}"
                turns.append(Turn(f"c{c}:{t['dia_id']}", text, ts + j * 30, f"c{c}:{n}"))
            n += 1
        for q in sample["qa"]:
            if q.get("category") == 5 or not q.get("evidence"):
                continue
            ev = frozenset(f"c{c}:{e.strip()}" for e in q["evidence"])
            questions.append(Question(q["question"], ev, f"category {q.get('category')}"))
    end = max(t.created_at for t in turns) + DAY
    return EvalSet("locomo", split, tuple(turns), tuple(questions), end)


def chitchat_data() -> Path | None:
    """``EMBER_BENCH_CHITCHAT``, else the ``dataset.json`` of the installed ``chitchat_dataset``
    package (found without importing it: its import reads nothing, but the file is 40 MB)."""
    if os.environ.get("EMBER_BENCH_CHITCHAT"):
        return Path(os.environ["EMBER_BENCH_CHITCHAT"])
    spec = importlib.util.find_spec("chitchat_dataset")
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(next(iter(spec.submodule_search_locations))) / "dataset.json"
    return candidate if candidate.is_file() else None


def _timestamp(text: str) -> float:
    """ "2018-10-29T22:31:05Z" -> epoch seconds, read as UTC (the data's local clock times
    carry a Z; only order and day matter here)."""
    return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()


def chitchat_turns(data: dict[str, Any], conversations: list[str]) -> list[Turn]:
    """Every message of the chosen conversations as a memory: ``<conversation>:<index>``, its
    lines joined with newlines, dated by its first line's timestamp; its session is its
    conversation."""
    turns = []
    for cid in conversations:
        for i, message in enumerate(data[cid]["messages"]):
            text = "\n".join(u["text"] for u in message).strip()
            if text:
                ts = _timestamp(message[0]["timestamp"])
                turns.append(Turn(f"{cid}:{i}", text, ts, cid))
    return turns


def chitchat_questions(
    turns: list[Turn], split: str | None = None, questions: Path | None = None
) -> list[Question]:
    """The hand-written questions of ``questions`` (default: the ``chitchat`` set's), one split
    or all when ``split`` is None; raises when an evidence item does not resolve to a turn
    holding its ``contains`` text."""
    by_id = {t.id: t for t in turns}
    out = []
    items = json.loads((questions or CHITCHAT_QUESTIONS).read_text())["questions"]
    for i, q in enumerate(items):
        if split is not None and (i % 2 == 0) != (split == "dev"):
            continue
        ev = set()
        for e in q["evidence"]:
            tid = f"{e['conversation']}:{e['message']}"
            turn = by_id.get(tid)
            if turn is None or e["contains"] not in turn.text:
                raise ValueError(f"question {i}: turn {tid} does not hold {e['contains']!r}")
            ev.add(tid)
        out.append(Question(q["question"], frozenset(ev), q["kind"]))
    return out


def chitchat(split: str, path: Path | None = None, name: str = "chitchat") -> EvalSet | None:
    """A Chit-Chat Challenge set (``name`` in ``CHITCHAT_SETS``); None (and a line on stderr)
    when its data is not found."""
    path = path or chitchat_data()
    if path is None or not path.is_file():
        print(
            f"# {name}: skipped (pip install chitchat-dataset, the `bench` extra, or set "
            "EMBER_BENCH_CHITCHAT to its dataset.json)",
            file=sys.stderr,
        )
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    questions_file = CHITCHAT_SETS[name]
    conversations = json.loads(questions_file.read_text())["conversations"]
    turns = chitchat_turns(data, conversations)
    questions = chitchat_questions(turns, split, questions_file)
    end = max(t.created_at for t in turns) + DAY
    return EvalSet(name, split, tuple(turns), tuple(questions), end)


def all_sets(split: str) -> list[EvalSet]:
    sets = [generated(split), agent_logs(split)]
    extras = [locomo(split), *(chitchat(split, name=n) for n in CHITCHAT_SETS)]
    return sets + [x for x in extras if x is not None]

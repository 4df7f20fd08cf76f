"""The comparison of the shadow against the steward: each measure kept apart, each with how it
was computed (pure). The semantic pairing is in ``pairing.py``.

Three coverage measures, never added up, because each can be wrong in its own way:
- **exact**: the texts are equal once NFKC-normalised with whitespace and punctuation
  removed — strict (a changed word is a miss), never a false match;
- **evidence**: the two facts point at a common transcript message — the same message can hold
  two different facts, so a shared pointer makes the facts *neighbours*, listed apart, and is
  never claimed as the same fact;
- **semantic** (``pairing.py``): a light model pairs facts that say the same thing —
  reviewable pairs, not ground truth.

Coverage is measured over the valid facts of the sessions both sides have read (a completed
run each): a session only one side ran in would count its facts as misses of the other.
Whole-session pointers (``observed-outcome`` of a session) are not evidence overlap: every fact
of the session would share them.

Cost is grouped by path x model x status at the price snapshot each call ran at, and is null
as soon as one run of the group has no price (never a smaller number). Evidence quality checks
pointer identity only; whether a fact is true still takes a human reading it.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ember.shadow.evidence import TARGETS

Side = Literal["shadow", "steward"]
SIDES: tuple[Side, ...] = ("shadow", "steward")

SHARED_EVIDENCE_NOTE = "shared evidence is reported separately, not claimed as semantic coverage"
PRICE_LABEL = "list price snapshot, not subscription billing"
QUALITY_NOTE = "pointer identity only: whether a fact is true still needs a human to read it"


@dataclass(frozen=True)
class Pointer:
    """One evidence item as proposed (possibly malformed: invalid proposals keep theirs)."""

    kind: str
    message_id: str | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class FactRow:
    """A shadow proposal or a steward fact."""

    id: str
    side: Side
    run_id: str
    session_id: str
    content: str
    pointers: tuple[Pointer, ...]
    validation_error: str | None = None

    @property
    def valid(self) -> bool:
        return self.validation_error is None

    @property
    def messages(self) -> frozenset[str]:
        return frozenset(p.message_id for p in self.pointers if p.message_id)


@dataclass(frozen=True)
class RunRow:
    """A shadow run (path ``hot``/``cold``) or a steward run (path ``steward``)."""

    id: str
    side: Side
    session_id: str
    path: str
    model: str | None
    status: str
    calls: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float | None = None
    estimated_usd: float | None = None
    price_snapshot: str | None = None


@dataclass(frozen=True)
class Target:
    """What an evidence pointer points at: a transcript message's session and kind."""

    session_id: str
    kind: str


def pointers_of(evidence_json: str | None) -> tuple[Pointer, ...]:
    """The evidence column as proposed, read leniently: anything that is not an object with
    a string ``kind`` is kept as a malformed pointer (kind ``""``), so quality counts it."""
    try:
        items = json.loads(evidence_json) if evidence_json else []
    except ValueError:
        return (Pointer(""),)
    if not isinstance(items, list):
        return (Pointer(""),)
    out = []
    for item in items:
        if not isinstance(item, dict):
            out.append(Pointer(""))
            continue
        kind, mid, sid = item.get("kind"), item.get("messageId"), item.get("sessionId")
        out.append(
            Pointer(
                kind if isinstance(kind, str) else "",
                mid if isinstance(mid, str) else None,
                sid if isinstance(sid, str) else None,
            )
        )
    return tuple(out)


def normalise(text: str) -> str:
    """NFKC, then every whitespace and punctuation character removed (case is kept: the exact
    measure is strict on purpose)."""
    return "".join(
        ch
        for ch in unicodedata.normalize("NFKC", text)
        if not ch.isspace() and not unicodedata.category(ch).startswith("P")
    )


@dataclass(frozen=True)
class Share:
    covered: int
    total: int

    @property
    def share(self) -> float | None:
        return self.covered / self.total if self.total else None

    def to_json(self) -> dict[str, Any]:
        return {"covered": self.covered, "total": self.total, "share": self.share}


def compared_sessions(runs: Iterable[RunRow]) -> set[str]:
    """Sessions with a completed run on both sides."""
    done: dict[Side, set[str]] = {"shadow": set(), "steward": set()}
    for r in runs:
        if r.status == "completed":
            done[r.side].add(r.session_id)
    return done["shadow"] & done["steward"]


def in_scope(facts: Iterable[FactRow], sessions: set[str]) -> tuple[list[FactRow], list[FactRow]]:
    """(steward facts, shadow facts): the valid ones of the compared sessions."""
    steward = [f for f in facts if f.valid and f.session_id in sessions and f.side == "steward"]
    shadow = [f for f in facts if f.valid and f.session_id in sessions and f.side == "shadow"]
    return steward, shadow


Pair = tuple[str, str]  # (steward fact id, shadow proposal id)


def _coverage(
    pairs: Iterable[Pair], steward: Sequence[FactRow], shadow: Sequence[FactRow]
) -> dict[str, Any]:
    pairs = list(pairs)
    return {
        "steward_covered_by_shadow": Share(len({a for a, _ in pairs}), len(steward)).to_json(),
        "shadow_covered_by_steward": Share(len({b for _, b in pairs}), len(shadow)).to_json(),
    }


def exact_pairs(steward: Sequence[FactRow], shadow: Sequence[FactRow]) -> list[Pair]:
    """Facts of the same session whose normalised texts are equal."""
    by_text: dict[tuple[str, str], list[str]] = defaultdict(list)
    for h in shadow:
        by_text[(h.session_id, normalise(h.content))].append(h.id)
    return [
        (s.id, h) for s in steward for h in by_text.get((s.session_id, normalise(s.content)), [])
    ]


def evidence_pairs(
    steward: Sequence[FactRow], shadow: Sequence[FactRow]
) -> list[tuple[str, str, list[str]]]:
    """(steward id, shadow id, the message ids they share) for facts of the same session."""
    by_session: dict[str, list[FactRow]] = defaultdict(list)
    for h in shadow:
        by_session[h.session_id].append(h)
    out = []
    for s in steward:
        for h in by_session.get(s.session_id, []):
            shared = s.messages & h.messages
            if shared:
                out.append((s.id, h.id, sorted(shared)))
    return out


def pair_json(a: str, b: str, text: Mapping[str, str]) -> dict[str, Any]:
    """A pair as the report lists it: both ids and both texts, for a reader to review."""
    return {"steward": a, "shadow": b, "steward_content": text[a], "shadow_content": text[b]}


def _texts(*sides: Sequence[FactRow]) -> dict[str, str]:
    return {f.id: f.content for side in sides for f in side}


def exact_coverage(steward: Sequence[FactRow], shadow: Sequence[FactRow]) -> dict[str, Any]:
    pairs = exact_pairs(steward, shadow)
    text = _texts(steward, shadow)
    return {
        "method": "texts equal after NFKC normalisation with whitespace and punctuation "
        "removed (case kept), within one session",
        **_coverage(pairs, steward, shadow),
        "pairs": [pair_json(a, b, text) for a, b in pairs],
    }


def evidence_coverage(steward: Sequence[FactRow], shadow: Sequence[FactRow]) -> dict[str, Any]:
    """Coverage by shared evidence; the pairs that are not exact matches are listed as
    neighbours — two facts read from one message may still be two facts."""
    found = evidence_pairs(steward, shadow)
    exact = set(exact_pairs(steward, shadow))
    text = _texts(steward, shadow)
    return {
        "method": "same session, at least one evidence message in common (whole-session "
        "pointers are not counted: every fact of the session shares them)",
        "note": SHARED_EVIDENCE_NOTE,
        **_coverage(((a, b) for a, b, _ in found), steward, shadow),
        "neighbours": [
            pair_json(a, b, text) | {"shared_messages": shared}
            for a, b, shared in found
            if (a, b) not in exact
        ],
    }


def cost_by_path_model_status(runs: Iterable[RunRow]) -> dict[str, Any]:
    groups: dict[tuple[str, str, str | None, str], list[RunRow]] = defaultdict(list)
    for r in runs:
        groups[(r.side, r.path, r.model, r.status)].append(r)
    rows: list[dict[str, Any]] = []
    for (side, path, model, status), members in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "", kv[0][3])
    ):
        rows.append(
            {
                "side": side,
                "path": path,
                "model": model,
                "status": status,
                "runs": len(members),
                "calls": sum(r.calls for r in members),
                "input_tokens": sum(r.input_tokens for r in members),
                "cache_read_tokens": sum(r.cache_read_tokens for r in members),
                "cache_write_tokens": sum(r.cache_write_tokens for r in members),
                "output_tokens": sum(r.output_tokens for r in members),
                "estimated_usd": usd_sum(r.estimated_usd for r in members),
                "price_snapshots": sorted({r.price_snapshot for r in members if r.price_snapshot}),
            }
        )
    runs_of: dict[str, list[RunRow]] = defaultdict(list)
    for members in groups.values():
        runs_of[members[0].side].extend(members)
    totals = {side: usd_sum(r.estimated_usd for r in runs_of[side]) for side in SIDES}
    return {
        "label": PRICE_LABEL,
        "method": "sum of each run's estimated_usd (its calls' input, cache-read, cache-write "
        "and output tokens at the price snapshot in force when it ran); null as soon as one "
        "run of the group has no price",
        "rows": rows,
        "totals_usd": totals,
    }


def usd_sum(values: Iterable[float | None]) -> float | None:
    """The sum, or None as soon as one value is unknown (never a smaller number)."""
    total = 0.0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..1): always one of the values, None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def latency_by_path(runs: Iterable[RunRow]) -> dict[str, Any]:
    by_path: dict[str, list[float]] = defaultdict(list)
    for r in runs:
        if r.status == "completed" and r.calls > 0 and r.latency_ms is not None:
            by_path[r.path].append(r.latency_ms)
    return {
        "method": "nearest-rank p50 and p95 of latency_ms (first call sent to last answer "
        "read) over completed runs that made at least one call",
        "rows": [
            {
                "path": path,
                "runs": len(values),
                "p50_ms": percentile(values, 0.50),
                "p95_ms": percentile(values, 0.95),
            }
            for path, values in sorted(by_path.items())
        ],
    }


PointerVerdict = Literal["ok", "missing_target", "other_session", "wrong_target", "malformed"]


def judge_pointer(p: Pointer, session_id: str, targets: Mapping[str, Target]) -> PointerVerdict:
    """What a pointer points at, against the kind it claims (identity, not truth)."""
    wanted = TARGETS.get(p.kind)
    if wanted is None or (p.message_id is None) == (p.session_id is None):
        return "malformed"
    if p.session_id is not None:
        if p.kind != "observed-outcome":
            return "wrong_target"
        return "ok" if p.session_id == session_id else "other_session"
    assert p.message_id is not None
    target = targets.get(p.message_id)
    if target is None:
        return "missing_target"
    if target.session_id != session_id:
        return "other_session"
    return "ok" if target.kind in wanted else "wrong_target"


_VERDICTS: tuple[PointerVerdict, ...] = (
    "ok",
    "missing_target",
    "other_session",
    "wrong_target",
    "malformed",
)


def evidence_quality(facts: Iterable[FactRow], targets: Mapping[str, Target]) -> dict[str, Any]:
    """Per side, over every proposal on record (the invalid ones too: how often a model
    invents evidence is part of what the comparison must show)."""
    stats: dict[Side, dict[str, int]] = {
        side: {"proposals": 0, "valid": 0, "facts_all_ok": 0, "pointers": 0}
        | dict.fromkeys(_VERDICTS, 0)
        for side in SIDES
    }
    for f in facts:
        s = stats[f.side]
        s["proposals"] += 1
        s["valid"] += int(f.valid)
        verdicts = [judge_pointer(p, f.session_id, targets) for p in f.pointers]
        s["pointers"] += len(verdicts)
        for v in verdicts:
            s[v] += 1
        s["facts_all_ok"] += int(bool(verdicts) and all(v == "ok" for v in verdicts))
    return {
        "method": "each pointer: the target message exists, is in the fact's session, and is "
        "what its kind claims (user-stated/user-accepted: a user message; tool-verified: a "
        "successful tool result; observed-outcome: a successful tool result or the session)",
        "note": QUALITY_NOTE,
        "rows": [{"side": side, **counts} for side, counts in stats.items()],
    }


@dataclass
class Inputs:
    """Everything the comparison reads from a project database."""

    runs: list[RunRow] = field(default_factory=list)
    facts: list[FactRow] = field(default_factory=list)
    targets: dict[str, Target] = field(default_factory=dict)


def report(inputs: Inputs, semantic: Mapping[str, Any]) -> dict[str, Any]:
    """The whole comparison (``semantic``: from ``pairing``, computed or not, with why)."""
    sessions = compared_sessions(inputs.runs)
    steward, shadow = in_scope(inputs.facts, sessions)
    all_sessions = {r.session_id for r in inputs.runs}
    return {
        "scope": {
            "method": "coverage counts the valid facts of sessions with a completed run on "
            "both sides; cost, latency and evidence quality count every run and proposal",
            "compared_sessions": len(sessions),
            "sessions_left_out": len(all_sessions - sessions),
            "steward_facts": len(steward),
            "shadow_proposals": len(shadow),
        },
        "exact": exact_coverage(steward, shadow),
        "evidence": evidence_coverage(steward, shadow),
        "semantic": dict(semantic),
        "cost": cost_by_path_model_status(inputs.runs),
        "latency": latency_by_path(inputs.runs),
        "evidence_quality": evidence_quality(inputs.facts, inputs.targets),
    }

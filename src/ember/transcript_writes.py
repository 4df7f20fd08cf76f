"""The transcript's writes as ops a PostgreSQL store can journal (``store.ops``).

Recording a request was two steps on the event loop: read where the thread stands (its
lineage), then write the new messages from there. A server that is down took both with it:
the read failed, the write was a waited one and failed too, and every message of the outage
was missing from the transcript (about 580 in one outage of 20 s under 12 agents) — and
with them what shadow memory would have learned from them. Here each write is an ``Op``,
held and journaled through the outage (``store.pg.held``):

- ``save_turn``: a thread this process knows (its lineage in memory): the rows and the
  lineage as computed on the event loop, written as they are.
- ``record_unplaced``: a thread this process cannot place (the server was down when it
  first saw it): every message of the request, placed inside the write's own transaction —
  lineage read, generation decided, rows made there — exactly as ``transcript_recorder._rows``
  would have done with the lineage in hand (a new thread, a restart of the history, a
  continuation of a stored response).

Invariants, and what each prevents:

- The text a journal holds is already masked (``redaction.mask``, on a worker thread): a key
  the user pasted never sits in a journal file either. The digests are of the text as said,
  as ever, so ids and placement are the same as on a recording made at once.
- Hooks run inside the write (shadow memory's first touch of a database, the start of a
  generation) are named by their import path: only ``@replayable`` functions, so a journal
  line calls nothing else (``store.ops.resolve``). A hook that is not one (a test's
  closure) makes the write a plain job, unjournaled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ember.protocols.transcript_items import item_digest
from ember.redaction import mask
from ember.store.driver import Connection
from ember.store.ops import Op, name_of, replayable, resolve
from ember.store.transcript_rows import (
    Lineage,
    Row,
    digests_by_position,
    insert_rows,
    latest_generation,
    load_lineage,
    message_id,
    place,
    save_lineage,
    stored_text,
)


@dataclass(frozen=True)
class Opened:
    """A generation of a session as this process first records a request of it: the request's
    own messages end before ``answer_at`` (where its answer is recorded)."""

    session_id: str
    generation: int
    answer_at: int


def hook_names(hooks: Sequence[Callable[..., Any]]) -> list[str] | None:
    """The hooks' names, or None when one cannot be named in a journal."""
    if not all(getattr(h, "__ember_replayable__", False) for h in hooks):
        return None
    return [name_of(h) for h in hooks]


def save(conn: Connection, session_id: str, rows: list[Row], lineage: Lineage) -> None:
    if rows:
        insert_rows(conn, rows)
    save_lineage(conn, session_id, lineage)


@replayable
def first_touch(conn: Connection, hooks: list[str]) -> None:
    """The hooks run before this process's first message in a database."""
    for name in hooks:
        resolve(name)(conn)  # type: ignore[call-arg]


def masked(rows: list[Row]) -> list[Row]:
    """``rows`` with their text masked (blocking: a worker thread)."""
    return [dataclasses.replace(r, content=mask(r.content)) for r in rows]


def saved_turn(
    session_id: str, rows: list[Row], lineage: Lineage, opened: list[str], answer_at: int
) -> Op:
    """The op of a placed request: its rows (masked already), the lineage after them, and
    the hooks of a generation's first request."""
    return Op(
        save_turn,
        {
            "session": session_id,
            "rows": [dataclasses.astuple(r) for r in rows],
            "lineage": dataclasses.astuple(lineage),
            "opened": opened,
            "answer_at": answer_at,
        },
    )


@replayable
def save_turn(conn: Connection, a: dict[str, Any]) -> None:
    session = a["session"]
    lineage = Lineage(*a["lineage"])
    save(conn, session, [Row(*r) for r in a["rows"]], lineage)
    for name in a["opened"]:
        resolve(name)(conn, Opened(session, lineage.generation, a["answer_at"]))


@dataclass(frozen=True)
class Piece:
    """A transcript item as a journal keeps it: its digest is of the text as said, its text
    is what is stored (cut, masked)."""

    position: int
    part: int
    role: str
    kind: str
    digest: str
    text: str


def pieces(items: Sequence[Any]) -> list[list[Any]]:
    """Transcript items as ``Piece`` fields (blocking: masks every text)."""
    return [
        [i.position, i.part, i.role, i.kind, item_digest(i), mask(stored_text(i.text))]
        for i in items
    ]


def unplaced(
    session_id: str,
    items: list[list[Any]],
    answer: list[list[Any]],
    count: int,
    continues: bool,
    opened: list[str],
) -> Op:
    """The op of a request of a thread this process cannot place: every item of the request
    (``pieces``), the answer's numbered from ``count`` (the request's messages), whether the
    request continues a stored response (``previous_response_id``)."""
    args = {"session": session_id, "items": items, "answer": answer, "count": count}
    return Op(record_unplaced, args | {"continues": continues, "opened": opened})


@replayable
def record_unplaced(conn: Connection, a: dict[str, Any]) -> None:
    """Place the request where the stored lineage says (``transcript_recorder._rows``'s rules) and
    write it, with the hooks of its generation's start."""
    session = a["session"]
    before, latest = load_lineage(conn, session), latest_generation(conn, session)
    offset = before.recorded if a["continues"] and before is not None else 0
    items = [Piece(*p) for p in a["items"]]
    digests = digests_by_position([(p.position, p.digest) for p in items])
    if offset and before is not None:
        generation, start = before.generation, offset
    else:
        generation, start = place(before, digests, latest)
    moved = [_shifted(p, offset) for p in items]
    answer = [_shifted(Piece(*p), offset) for p in a["answer"]]
    rows = [_row(session, generation, p) for p in [*moved, *answer] if p.position >= start]
    count = a["count"] + offset
    recorded = max([count, *(p.position + 1 for p in answer)])
    if offset and before is not None:
        lineage = dataclasses.replace(before, recorded=recorded)
    else:
        first, last = (digests[0], digests[-1]) if digests else ("", "")
        lineage = Lineage(generation, first, len(digests), last, recorded)
    save(conn, session, rows, lineage)
    for name in a["opened"]:
        resolve(name)(conn, Opened(session, lineage.generation, count))


def _shifted(p: Piece, offset: int) -> Piece:
    return dataclasses.replace(p, position=p.position + offset) if offset else p


def _row(session: str, generation: int, p: Piece) -> Row:
    mid = message_id(session, generation, p.position, p.part, p.digest)
    return Row(mid, session, generation, p.position, p.part, p.role, p.kind, p.digest, p.text)

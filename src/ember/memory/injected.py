"""The requests a memory went into and whether their answers cited it (a memory's page on the
dashboard, ``ember memory show``), and the citations of a session's injections (its requests'
page).

``memory_injected`` holds one row per memory of each injected block, written by the ledger with
the block's own row. A verdict is computed from the block as it was injected and the answers
the transcript recorded after the ask (``used``), never from the memory as it is now: both are
records of what happened, so forgetting or editing the memory later leaves an old request's
verdict as it was. A memory's verdict is kept in its row (``cited``) once the window of
answers is full (``used.WINDOW``), so a fact injected into thousands of asks is not re-read and
re-stemmed on every look; before that it is computed again each time. The same records give
the same verdict, so a kept one and a computed one never disagree.

Plain SQL both backends accept, over one connection.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ember.memory.used import WINDOW, cited_ids, injected_texts
from ember.store.driver import Connection

#: How many of a memory's requests are listed (newest first); the counts cover them all.
LISTED = 100


@dataclass(frozen=True)
class Injection:
    """One ask a memory went into; ``cited`` is None while no answer after it is recorded."""

    session_id: str
    message_index: int
    message_digest: str
    created_at: float
    cited: bool | None

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "message_index": self.message_index,
            "created_at": self.created_at,
            "cited": self.cited,
        }


@dataclass(frozen=True)
class MemoryUse:
    """How often a memory was injected (``requests``: asks whose block carried it) and cited,
    how many of those asks have no answer recorded yet, and the latest of them."""

    requests: int
    cited: int
    unanswered: int
    last: float | None
    latest: tuple[Injection, ...]
    #: verdicts now final and not kept yet (``keep`` stores them)
    settled: tuple[Injection, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "cited": self.cited,
            "unanswered": self.unanswered,
            "last_injected_at": self.last,
            "latest": [i.to_json() for i in self.latest],
        }


def answers_after(conn: Connection, session_id: str, message_index: int) -> list[str]:
    """The assistant messages the transcript recorded after the ask, at most ``WINDOW``."""
    rows = conn.execute(
        "SELECT content FROM transcript_messages WHERE session_id = ? AND role = 'assistant' "
        "AND position > ? ORDER BY seq LIMIT ?",
        (session_id, message_index, WINDOW),
    )
    return [r[0] for r in rows]


_OF_MEMORY = """
SELECT j.session_id, j.message_index, j.message_digest, j.created_at, j.cited,
       CASE WHEN j.cited IS NULL THEN i.block END AS block,
       CASE WHEN j.cited IS NULL THEN i.memory_ids END AS memory_ids
FROM memory_injected AS j LEFT JOIN memory_injections AS i
  ON i.session_id = j.session_id AND i.message_index = j.message_index
 AND i.message_digest = j.message_digest
WHERE j.memory_id = ?
ORDER BY j.created_at DESC, j.session_id, j.message_index
"""


def memory_use(conn: Connection, memory_id: str, listed: int = LISTED) -> MemoryUse:
    """Every ask ``memory_id`` went into, counted, the newest ``listed`` of them kept."""
    found: list[Injection] = []
    settled: list[Injection] = []
    for r in conn.execute(_OF_MEMORY, (memory_id,)).fetchall():
        cited: bool | None = None if r[4] is None else bool(r[4])
        if cited is None and r[5] is not None:
            texts = injected_texts(r[5], json.loads(r[6] or "[]"))
            answers = answers_after(conn, r[0], r[1])
            text = texts.get(memory_id)
            if answers:
                cited = text is not None and bool(cited_ids({memory_id: text}, answers))
            if len(answers) >= WINDOW:
                settled.append(Injection(r[0], r[1], r[2], r[3], cited))
        found.append(Injection(r[0], r[1], r[2], r[3], cited))
    return MemoryUse(
        requests=len(found),
        cited=sum(i.cited is True for i in found),
        unanswered=sum(i.cited is None for i in found),
        last=found[0].created_at if found else None,
        latest=tuple(found[:listed]),
        settled=tuple(settled),
    )


def keep(conn: Connection, memory_id: str, settled: Sequence[Injection]) -> None:
    """Store final verdicts (a write: run it on the database's writer)."""
    conn.executemany(
        "UPDATE memory_injected SET cited = ? WHERE memory_id = ? AND session_id = ? "
        "AND message_index = ? AND message_digest = ? AND cited IS NULL",
        [
            (int(bool(i.cited)), memory_id, i.session_id, i.message_index, i.message_digest)
            for i in settled
        ],
    )


def session_injections(conn: Connection, session_id: str) -> list[dict[str, Any]]:
    """A session's ledger rows in order, each with the ids its answers cite (``cited_ids``)
    and ``used``: whether any is cited (None while no answer after the ask is recorded)."""
    rows = conn.execute(
        "SELECT message_index, block, memory_ids, created_at, busy FROM memory_injections "
        "WHERE session_id = ? ORDER BY created_at",
        (session_id,),
    ).fetchall()
    answers = conn.execute(
        "SELECT position, content FROM transcript_messages WHERE session_id = ? "
        "AND role = 'assistant' ORDER BY seq",
        (session_id,),
    ).fetchall()
    out = []
    for r in rows:
        block, ids = r[1] or "", json.loads(r[2] or "[]")
        after = [a[1] for a in answers if a[0] > r[0]][:WINDOW]
        cited = cited_ids(injected_texts(block, ids), after) if after else []
        out.append(
            {
                "message_index": r[0],
                "block": block,
                "memory_ids": ids,
                "created_at": r[3],
                "busy": bool(r[4]),
                "cited_ids": cited,
                "used": bool(cited) if after else None,
            }
        )
    return out

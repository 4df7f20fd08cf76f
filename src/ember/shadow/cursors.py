"""Where each session's shadow starts reading, initialised once, then its own.

The rule: a conversation's history from before shadow memory first saw it is never read;
everything said from then on is. "Seen" is the first request of the conversation (of each
generation of it) recorded while shadow memory is on: what that request held up to its last
answer is history, its new turn and all that follows are read. A conversation that starts
while shadow memory is on is therefore read from its first message, and one that started
before is read from the turn it came back with — whatever else recorded it in between
(traffic learning records the transcript with shadow memory off; whether it happened to
record part of a session must not move where shadow memory starts: that used to be the
difference between reading a resumed session whole and reading its last turn).

- The activation watermark: the project's highest transcript ``seq`` when shadow memory was
  first enabled for it. Written once (a trigger refuses an update).
- The start of a generation (``shadow_starts``, ``mark_start``): the highest ``seq`` of its
  history as the first request recorded with shadow memory on held it. Written once, in the
  job that records that request, from that request alone.
- A session's cursor, per generation, the first time its shadow runs:
  - if the steward has digested any generation of the session: ``steward``, and each
    generation's baseline is what the steward digested of it (its undigested backlog is the
    shadow's to read);
  - otherwise ``enabled``: the baseline is the generation's start — or, for a generation
    recorded with no start (by a proxy that had shadow memory off, or by an older version),
    its last message at or before the watermark.
- From then on the cursor moves only with the shadow's own completed runs:
  ``ready = max(baseline, the highest through_seq of a completed run)``. It never follows the
  steward again: the comparison needs two pipelines that read on their own, or the shadow
  would miss exactly what the steward missed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from ember.store.driver import Connection

Initialization = Literal["steward", "enabled"]


def activate(conn: Connection) -> int:
    """Write the watermark if it is not there yet (a write job); returns it.

    ``ON CONFLICT (id) DO NOTHING`` on both backends: an upsert never updates here (the
    trigger would refuse it), and on PostgreSQL a second proxy activating the same project at
    the same moment waits for the first and keeps its watermark. (``WHERE true``: SQLite
    reads an ``ON`` after ``INSERT ... SELECT ... FROM t`` as a join's unless a WHERE ends
    the SELECT.)"""
    conn.execute(
        "INSERT INTO shadow_activation (id, through_seq, activated_at) "
        "SELECT 1, COALESCE(MAX(seq), 0), ? FROM transcript_messages WHERE true "
        "ON CONFLICT (id) DO NOTHING",
        (time.time(),),
    )
    return watermark(conn)


def mark_start(conn: Connection, session_id: str, generation: int, answer_at: int) -> None:
    """The generation's start, if it has none yet (a write job, after the rows of its first
    request seen with shadow memory on; ``answer_at``: the position after that request's own
    messages): its messages up to the request's last answer are history. A request with no
    answer in it (a new conversation) has none: it is read from its first message."""
    conn.execute(
        "INSERT INTO shadow_starts (session_id, generation, through_seq, created_at) "
        "SELECT ?, ?, COALESCE(MAX(seq), 0), ? FROM transcript_messages "
        "WHERE session_id = ? AND generation = ? AND position <= ("
        "SELECT COALESCE(MAX(position), -1) FROM transcript_messages "
        "WHERE session_id = ? AND generation = ? AND role = 'assistant' AND position < ?) "
        "ON CONFLICT (session_id, generation) DO NOTHING",
        (session_id, generation, time.time(), *(session_id, generation) * 2, answer_at),
    )


def start(conn: Connection, session_id: str, generation: int) -> int | None:
    """The generation's start (None: recorded with no start)."""
    row = conn.execute(
        "SELECT through_seq FROM shadow_starts WHERE session_id=? AND generation=?",
        (session_id, generation),
    ).fetchone()
    return None if row is None else int(row[0])


def watermark(conn: Connection) -> int:
    row = conn.execute("SELECT through_seq FROM shadow_activation WHERE id=1").fetchone()
    return int(row[0]) if row is not None else 0


@dataclass(frozen=True)
class Cursor:
    session_id: str
    generation: int
    baseline: int
    initialization: Initialization
    ready: int  # read everything after this seq


def ensure_cursor(conn: Connection, session_id: str, generation: int) -> Cursor:
    """The cursor of ``(session, generation)``, initialised if it has none (a write job).

    Initialised once whoever asks first: on PostgreSQL two proxies may both find no cursor
    (SQLite's write lock would have ordered them); the second insert is skipped and the
    cursor is read back, so both read from the one baseline stored, never from their own."""
    row = _stored(conn, session_id, generation)
    if row is None:
        baseline, init = _initial(conn, session_id, generation)
        conn.execute(
            "INSERT INTO shadow_cursors VALUES (?,?,?,?,?) "
            "ON CONFLICT (session_id, generation) DO NOTHING",
            (session_id, generation, baseline, init, time.time()),
        )
        row = _stored(conn, session_id, generation)
        assert row is not None
    baseline, init = int(row[0]), row[1]
    ready = max(baseline, _done(conn, session_id, generation))
    return Cursor(session_id, generation, baseline, init, ready)


def _stored(conn: Connection, session_id: str, generation: int) -> Any:
    return conn.execute(
        "SELECT baseline_seq, initialization FROM shadow_cursors "
        "WHERE session_id=? AND generation=?",
        (session_id, generation),
    ).fetchone()


def _initial(conn: Connection, session_id: str, generation: int) -> tuple[int, Initialization]:
    digested = conn.execute(
        "SELECT generation, through_seq FROM steward_digested WHERE session_id=?", (session_id,)
    ).fetchall()
    if digested:
        mine = {int(g): int(t) for g, t in digested}
        return mine.get(generation, 0), "steward"
    marked = start(conn, session_id, generation)
    if marked is not None:
        return marked, "enabled"
    row = conn.execute(
        "SELECT MAX(seq) FROM transcript_messages WHERE session_id=? AND generation=? AND seq<=?",
        (session_id, generation, watermark(conn)),
    ).fetchone()
    return int(row[0] or 0), "enabled"


def _done(conn: Connection, session_id: str, generation: int) -> int:
    row = conn.execute(
        "SELECT MAX(through_seq) FROM shadow_memory_runs "
        "WHERE session_id=? AND generation=? AND status='completed'",
        (session_id, generation),
    ).fetchone()
    return int(row[0] or 0)

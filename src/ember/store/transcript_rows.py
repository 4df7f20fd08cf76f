"""The transcript's rows: every message ember sees, stored once per project with a stable id.

Evidence points at these ids (``m:<id>`` in the shadow question), so an id must never change:
it is a digest of the session, the generation, the position and the content. Clients resend
the whole history every turn; only what is new is written (``(session, generation, position,
digest)`` is unique besides).

Generations: a request whose history extends the previous one's continues the generation;
anything else (a compaction that restarted the history, ``/clear``, an edited message) starts
the next one. Extension is judged on what the *client* sent — its first message and the last
message of its previous request — not on ember's recording of the answer, which the client
may spell differently when it sends it back.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ember.protocols.transcript_items import Said, item_digest
from ember.redaction import mask
from ember.store.driver import Connection
from ember.store.pg.serial import one_writer

#: The recorded text of one message is cut here (the question shows the start of it anyway).
MAX_CONTENT_CHARS = 20_000


class Item(Said, Protocol):
    """One piece of a conversation as the protocol adapters see it
    (``ember.protocols.base.TranscriptItem``): what it says, and where."""

    @property
    def position(self) -> int: ...
    @property
    def part(self) -> int: ...


def message_id(session_id: str, generation: int, position: int, part: int, digest: str) -> str:
    """Stable across resends: the same message at the same place is the same id; "the parent
    participates", so the same words elsewhere in the conversation are another message."""
    raw = f"{session_id}\0{generation}\0{position}\0{part}\0{digest}".encode()
    return "m" + hashlib.sha256(raw).hexdigest()[:12]


@dataclass
class Lineage:
    """Where a session's transcript stands in this process."""

    generation: int
    first_digest: str
    request_count: int  # messages the client sent in its last request
    request_last_digest: str
    recorded: int  # positions recorded (the answer's included)


def _joined(digests: list[str]) -> str:
    return hashlib.sha256("\0".join(digests).encode()).hexdigest()[:24]


#: The digest of a position without items, computed once: a request read from its last
#: recorded message has every earlier position empty, and hashing each of them again cost a
#: long session ~1.5 us per message on every request.
_EMPTY = _joined([])


def position_digests(items: Sequence[Item]) -> list[str]:
    """One digest per message position (its items' digests joined), in order; a position
    with no transcript item (a system message, or one before a read's start) gets the
    digest of nothing."""
    return digests_by_position([(item.position, item_digest(item)) for item in items])


def digests_by_position(items: Sequence[tuple[int, str]]) -> list[str]:
    """``position_digests`` of items given as (position, digest): items whose text is no
    longer the text they said (masked for a journal) keep the digest of what they said."""
    by_position: dict[int, list[str]] = {}
    for position, digest in items:
        by_position.setdefault(position, []).append(digest)
    last = max(by_position, default=-1)
    return [_joined(by_position[i]) if i in by_position else _EMPTY for i in range(last + 1)]


@dataclass(frozen=True)
class Row:
    id: str
    session_id: str
    generation: int
    position: int
    part: int
    role: str
    kind: str
    digest: str
    content: str

    def values(self, now: float) -> tuple[object, ...]:
        """The row as inserted, its text masked here: on the writer's thread, not on the
        event loop that built the row (a 20 KB tool result costs ~1 ms to screen)."""
        return (
            self.id,
            self.session_id,
            self.generation,
            self.position,
            self.part,
            self.role,
            self.kind,
            self.digest,
            mask(self.content),
            now,
        )


def place(
    lineage: Lineage | None, digests: Sequence[str], latest_generation: int
) -> tuple[int, int]:
    """(generation, first position to record) for a request whose messages have ``digests``.

    ``latest_generation`` is the highest generation on file for the session (0: none), used
    when this process has not seen the session yet: the request then starts a generation of
    its own unless the file says otherwise (a restart costs at most a generation boundary,
    never a lost or doubled message).
    """
    if lineage is not None and _extends(lineage, digests):
        return lineage.generation, lineage.recorded
    if lineage is not None:
        return lineage.generation + 1, 0
    return latest_generation + 1, 0


def _extends(lineage: Lineage, digests: Sequence[str]) -> bool:
    n = lineage.request_count
    return (
        len(digests) >= n > 0
        and digests[0] == lineage.first_digest
        and digests[n - 1] == lineage.request_last_digest
    )


def stored_text(text: str) -> str:
    """What is stored of a message's text: its start (``MAX_CONTENT_CHARS``), with each NUL
    character as U+FFFD; every secret in it is masked when the row is written
    (``Row.values``). PostgreSQL's ``text`` cannot hold a NUL: a tool result that printed one
    (a binary file read) would fail the whole transcript write there. A key the user pasted
    would otherwise sit in the project's database, be shown as evidence on the dashboard and
    be read back by a cold shadow run. The same rule on both backends keeps a project's rows
    equal wherever they are stored; the message's id and digest are of its text as said, so
    nothing that points at it moves."""
    return text[:MAX_CONTENT_CHARS].replace("\x00", "\ufffd")


def rows_for(session_id: str, generation: int, items: Sequence[Item], start: int) -> list[Row]:
    out = []
    for item in items:
        if item.position < start:
            continue
        digest = item_digest(item)
        out.append(
            Row(
                message_id(session_id, generation, item.position, item.part, digest),
                session_id,
                generation,
                item.position,
                item.part,
                item.role,
                item.kind,
                digest,
                stored_text(item.text),
            )
        )
    return out


# ON CONFLICT DO NOTHING (no target: either unique key) is SQLite's INSERT OR IGNORE for
# these rows and PostgreSQL's too: a resent message is skipped on both backends, and on
# PostgreSQL a row another proxy is inserting at the same moment waits and is skipped rather
# than failing the job. (Roles and kinds come typed from the adapters, so the CHECKs that
# INSERT OR IGNORE would also have skipped on never fire.)
_INSERT = """INSERT INTO transcript_messages
    (id, session_id, generation, position, part, role, kind, digest, content, created_at)
    VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING"""


def insert_rows(conn: Connection, rows: Sequence[Row]) -> None:
    """The write job (on the database's writer).

    A session's messages become visible in ``seq`` order: readers (the shadow's cursor, the
    steward's window) read a session past the highest seq they read, so a lower seq that
    became visible later would never be read. SQLite's one writer per file gives that
    order. On PostgreSQL several proxies write one schema, and a transaction that took seq
    10 may commit after one that took seq 11: the insert holds its schema's writer lock
    (``store.pg.serial.one_writer``; a write batch holds it from its start), so the next
    insert takes its seq only after the previous one committed."""
    values = [r.values(time.time()) for r in rows]  # (masked before the writer lock is taken)
    one_writer(conn)
    conn.executemany(_INSERT, values)


def load_lineage(conn: Connection, session_id: str) -> Lineage | None:
    """The session's lineage as the last process left it (None: never recorded)."""
    row = conn.execute(
        "SELECT generation, first_digest, request_count, request_last_digest, recorded "
        "FROM shadow_lineage WHERE session_id=?",
        (session_id,),
    ).fetchone()
    return None if row is None else Lineage(int(row[0]), row[1], int(row[2]), row[3], int(row[4]))


def save_lineage(conn: Connection, session_id: str, lineage: Lineage) -> None:
    """The session's lineage, replacing the one stored (an upsert both backends speak)."""
    conn.execute(
        "INSERT INTO shadow_lineage VALUES (?,?,?,?,?,?,?) ON CONFLICT (session_id) DO UPDATE "
        "SET generation = excluded.generation, first_digest = excluded.first_digest, "
        "request_count = excluded.request_count, "
        "request_last_digest = excluded.request_last_digest, recorded = excluded.recorded, "
        "updated_at = excluded.updated_at",
        (
            session_id,
            lineage.generation,
            lineage.first_digest,
            lineage.request_count,
            lineage.request_last_digest,
            lineage.recorded,
            time.time(),
        ),
    )


def latest_generation(conn: Connection, session_id: str) -> int:
    row = conn.execute(
        "SELECT MAX(generation) FROM transcript_messages WHERE session_id=?", (session_id,)
    ).fetchone()
    return int(row[0] or 0)


@dataclass(frozen=True)
class Message:
    """A transcript message as the shadow reads it back."""

    seq: int
    id: str
    session_id: str
    generation: int
    position: int
    role: str
    kind: str
    content: str
    #: ``item_digest`` of what it said (of its whole text, where ``content`` may be cut)
    digest: str = ""


def unread(conn: Connection, session_id: str, generation: int, after_seq: int) -> list[Message]:
    rows = conn.execute(
        "SELECT seq, id, session_id, generation, position, role, kind, content, digest "
        "FROM transcript_messages WHERE session_id=? AND generation=? AND seq>? ORDER BY seq",
        (session_id, generation, after_seq),
    )
    return [Message(*tuple(r)) for r in rows]


def by_ids(conn: Connection, ids: Sequence[str]) -> dict[str, Message]:
    out: dict[str, Message] = {}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(
            "SELECT seq, id, session_id, generation, position, role, kind, content, digest "
            f"FROM transcript_messages WHERE id IN ({marks})",
            chunk,
        ):
            m = Message(*tuple(r))
            out[m.id] = m
    return out

"""Where sightings are kept: the project's ``traffic_sightings`` table (``store/schema``).

A lesson is saved at its second sighting, and ``ember wrap`` runs one proxy per session: a
count kept in the proxy's memory died with it, so a lesson seen once in each session never
reached two. The count, the evidence of each sighting and the save mark are rows of the
project's own file instead — the file the lesson's memory goes to, so a sighting in one project
can never count toward another, and a lesson saved before a restart is not saved again.

Every function taking a connection runs inside a write job of the file's one owner
(``db.submit``, on its writer thread): reading a lesson's row, applying ``learner.sight`` and
writing the row back is one transaction, so two proxies of one project (two terminals, each
running ``ember wrap``) never both count from the same old row, and only one of them hands the
lesson out. Nothing is read on the request path: the stage only queues the job.

A sighting counts once per message it was seen in (``Observation.pointer``, kept in
``traffic_seen``): a session resumed after a restart sends its history again, and the mistake
in it, made once, must not become a lesson seen twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import orjson

from ember.facts import Evidence
from ember.store.driver import Connection
from ember.store.sql import one_writer
from ember.traffic.learner import MAX_PENDING, MAX_SAVED, MIN_EVIDENCE, Sighting, max_age, sight
from ember.traffic.patterns import Category, Observation

_COLUMNS = "key, category, content, count, evidence, saved, first_seen, last_seen"
#: Messages kept per lesson in ``traffic_seen`` (the most recent): a replay of a conversation
#: older than the last 256 sightings of a lesson already saved may raise its count, never save it
#: again (a pending lesson has fewer sightings than its threshold).
MAX_SEEN_PER_LESSON = 256
#: The keys of one save state past the ``keep`` most recently seen. A window function, not
#: ``rowid ... LIMIT -1 OFFSET``: one statement both SQLite and PostgreSQL run,
#: where PostgreSQL has no rowid and no ``LIMIT -1``. Ties on ``last_seen`` go by key, so
#: both backends keep the same rows.
_PAST_BOUND = (
    "SELECT key FROM (SELECT key, ROW_NUMBER() "
    "OVER (ORDER BY last_seen DESC, key DESC) AS n FROM traffic_sightings WHERE saved = ?) "
    "AS ranked WHERE n > ?"
)
_TOO_OLD = "SELECT key FROM traffic_sightings WHERE last_seen < ? AND category = ?"
#: A lesson's messages older than its ``MAX_SEEN_PER_LESSON`` most recent.
_TRIM_SEEN = (
    "DELETE FROM traffic_seen WHERE key = ? AND seen_at < (SELECT seen_at FROM traffic_seen "
    "WHERE key = ? ORDER BY seen_at DESC LIMIT 1 OFFSET ?)"
)


class Sightings:
    """The accumulation rules of one process (thresholds, bounds), applied to a project's
    table by write jobs."""

    def __init__(
        self,
        min_evidence: Mapping[Category, int] = MIN_EVIDENCE,
        max_pending: int = MAX_PENDING,
        max_saved: int = MAX_SAVED,
    ) -> None:
        self.min_evidence = min_evidence
        self.max_pending = max_pending
        self.max_saved = max_saved

    def record(
        self, conn: Connection, found: Sequence[Observation], now: float
    ) -> list[Observation]:
        """Count one sighting of each observation (in order: one lesson seen in two messages
        of a request is two sightings; a message it was counted for already, now or before,
        counts nothing); the facts that reached their threshold now, each with the evidence
        of all its sightings, marked saved in the same transaction. A new lesson's row prunes
        the table back to its bounds."""
        one_writer(conn)  # on PostgreSQL, two proxies never count from the same old row
        ready: list[Observation] = []
        grew = False
        for obs in found:
            if not _first_count(conn, obs, now):
                continue
            entry, fact = sight(load(conn, obs.key), obs, now, self.min_evidence)
            _put(conn, entry)
            grew = grew or entry.count == 1
            if entry.count > MAX_SEEN_PER_LESSON:
                conn.execute(_TRIM_SEEN, (obs.key, obs.key, MAX_SEEN_PER_LESSON - 1))
            if fact is not None:
                ready.append(fact)
        if grew:
            self.prune(conn, now)
        return ready

    def prune(self, conn: Connection, now: float) -> None:
        """Forget lessons not seen within their age (``learner.max_age``: recoveries, the
        soonest, after 21 days), then all but the most recently seen ``max_pending`` pending
        and ``max_saved`` saved ones."""
        for category in Category:
            _delete(conn, _TOO_OLD, (now - max_age(category), category.value))
        for saved, keep in ((0, self.max_pending), (1, self.max_saved)):
            _delete(conn, _PAST_BOUND, (saved, keep))

    def release(self, conn: Connection, keys: Sequence[str]) -> None:
        """Facts handed out whose memory could not be written: pending again, count and
        evidence kept, so their next sighting hands them out again."""
        conn.executemany(
            "UPDATE traffic_sightings SET saved = 0 WHERE key = ?", [(k,) for k in keys]
        )

    def forget(self, conn: Connection, keys: Sequence[str]) -> None:
        """Facts whose evidence did not hold: learned again from their next sighting on."""
        conn.executemany("DELETE FROM traffic_seen WHERE key = ?", [(k,) for k in keys])
        conn.executemany("DELETE FROM traffic_sightings WHERE key = ?", [(k,) for k in keys])


def _first_count(conn: Connection, obs: Observation, now: float) -> bool:
    """Whether ``obs`` is the first sighting of its lesson in its message (and notes that it
    was): False for a message the lesson was counted for already, by this proxy or an
    earlier one. An observation naming no message always counts."""
    pointer = obs.pointer
    if not pointer:
        return True
    cur = conn.execute(
        "INSERT INTO traffic_seen (key, pointer, seen_at) VALUES (?, ?, ?) "
        "ON CONFLICT (key, pointer) DO NOTHING",
        (obs.key, pointer, now),
    )
    return bool(cur.rowcount)


def _delete(conn: Connection, keys: str, args: tuple[object, ...]) -> None:
    """Lessons (``keys``: a query of their keys) gone, with the messages they were counted
    for."""
    conn.execute(f"DELETE FROM traffic_seen WHERE key IN ({keys})", args)
    conn.execute(f"DELETE FROM traffic_sightings WHERE key IN ({keys})", args)


def load(conn: Connection, key: str) -> Sighting | None:
    """The lesson's row (None: never seen, or a row this version cannot read)."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM traffic_sightings WHERE key = ?", (key,)).fetchone()
    if row is None:
        return None
    try:
        category = Category(row[1])
    except ValueError:
        return None
    return Sighting(
        Observation(category, row[0], row[2]),
        int(row[3]),
        _evidence(row[4]),
        bool(row[5]),
        float(row[6]),
        float(row[7]),
    )


def _put(conn: Connection, entry: Sighting) -> None:
    obs = entry.observation
    pointers = [{k: v for k, v in asdict(p).items() if v is not None} for p in entry.evidence]
    conn.execute(
        f"INSERT INTO traffic_sightings ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (key) DO UPDATE SET category = excluded.category, "
        "content = excluded.content, count = excluded.count, evidence = excluded.evidence, "
        "saved = excluded.saved, first_seen = excluded.first_seen, last_seen = excluded.last_seen",
        (
            obs.key,
            obs.category.value,
            obs.content,
            entry.count,
            orjson.dumps(pointers).decode(),
            int(entry.saved),
            entry.first_seen,
            entry.last_seen,
        ),
    )


def _evidence(text: str) -> tuple[Evidence, ...]:
    """The stored pointers; one that does not read as evidence is dropped (the save checks
    every pointer against the transcript anyway)."""
    try:
        raw: Any = orjson.loads(text)
    except orjson.JSONDecodeError:
        return ()
    out: list[Evidence] = []
    for p in raw if isinstance(raw, list) else []:
        if not isinstance(p, dict):
            continue
        try:
            kind = p["kind"]
            out.append(
                Evidence(kind, message_id=p.get("message_id"), session_id=p.get("session_id"))
            )
        except (KeyError, ValueError, TypeError):
            continue
    return tuple(out)

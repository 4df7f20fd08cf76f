"""What ``bench/pg_soak.py`` checks on the server against what the clients were answered.

- ``written``: per table, the rows the sessions of a proxy left — accounting rows (the
  clients' own), memory ledger rows (one per new ask) and transcript messages (the ask and
  the answer of each turn). Each must equal what the agents were answered (times two for
  the transcript): a row missing is a write an outage or a kill lost, one too many a write
  delivered twice. A killed proxy's ledger may hold one more row per ask it had forwarded
  when it died (``verdict``'s ``in_flight``).
- ``proposals``: no user message is read by two completed shadow runs, and none is named by
  two valid proposals — a run that met an outage (its reads or its one write refused) is read
  again later, never twice over. Messages no completed run read are counted too (the
  budget skips runs: not a loss).
- ``complaints``: the warning and error lines a proxy's log gained.
- ``integrity``: what must never exist (unvalidated constraints, index rows that disagree with
  the memories, valid evidence outside its session); ``leaks``: a project's request carrying
  the other project's memory.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ember.memory.index.pg_check import problems
from ember.store.pg.database import PgDatabase
from ember.store.schema import PROJECT, for_postgres
from ember.testing import Emulator

CWD_A, CWD_B = "/home/team/alpha-api", "/home/team/beta-web"

#: table -> (its rows of the sessions, rows per answered turn)
WRITTEN = {
    "exchanges": ("SELECT COUNT(*) FROM {s}.exchanges WHERE origin = 'client' "
                  "AND session_id = ANY(%s)", 1),
    "ledger": ("SELECT COUNT(*) FROM {s}.memory_injections WHERE session_id = ANY(%s)", 1),
    "transcript": ("SELECT COUNT(*) FROM {s}.transcript_messages WHERE session_id = ANY(%s)", 2),
}  # fmt: skip

_PROPOSALS = """
WITH said AS (
    SELECT seq, id, session_id, generation FROM {s}.transcript_messages WHERE kind = 'user'),
read AS (
    SELECT m.id, COUNT(r.id) AS n FROM said m LEFT JOIN {s}.shadow_memory_runs r
      ON r.session_id = m.session_id AND r.generation = m.generation
     AND r.status = 'completed' AND m.seq BETWEEN r.from_seq AND r.through_seq
     GROUP BY m.id),
proposed AS (
    SELECT e.message_id AS id, COUNT(*) AS n FROM {s}.shadow_proposal_evidence e
      JOIN {s}.shadow_fact_proposals p ON p.id = e.proposal_id
     WHERE p.validation_error IS NULL AND e.message_id IS NOT NULL GROUP BY 1)
SELECT
    (SELECT COUNT(*) FROM read WHERE n = 1),
    (SELECT COUNT(*) FROM read WHERE n = 0),
    (SELECT COUNT(*) FROM read WHERE n > 1),
    (SELECT COUNT(*) FROM proposed WHERE n > 1),
    (SELECT COUNT(*) FROM {s}.shadow_fact_proposals WHERE validation_error IS NULL)
"""


def written(conn: Any, schema: str, sessions: Sequence[str]) -> dict[str, int]:
    """Rows of ``sessions`` per table of ``WRITTEN``."""
    out = {}
    for name, (sql, _) in WRITTEN.items():
        out[name] = int(conn.execute(sql.format(s=schema), (list(sessions),)).fetchone()[0])
    return out


def verdict(rows: dict[str, int], answered: int, in_flight: int = 0) -> str:
    """``exchanges 120 ledger 120 transcript 240 (exact)`` or what is off, and by how much.

    ``in_flight``: asks a killed proxy may have forwarded and never answered (one per agent
    at most). Each has its ledger row — the row is written when the ask's memories are
    chosen, before it is forwarded, and says what the provider was sent — but neither an
    accounting row nor a transcript: the client was never answered."""
    parts, off, noted = [], [], []
    for name, n in rows.items():
        want = answered * WRITTEN[name][1]
        parts.append(f"{name} {n}")
        if name == "ledger" and want < n <= want + in_flight:
            noted.append(f"ledger {n - want:+d}: asks in flight at the kill")
        elif n != want:
            off.append(f"{name} {n - want:+d}")
    said = f" (OFF: {', '.join(off)})" if off else " (exact)"
    return " ".join(parts) + said + "".join(f" ({x})" for x in noted)


def proposals(conn: Any, schema: str) -> str:
    """The user messages (asks) shadow runs read, and the proposals they made, in one line;
    ``(exact)`` when none was read or proposed twice."""
    if not conn.execute("SELECT to_regclass(%s)", (f"{schema}.shadow_memory_runs",)).fetchone()[0]:
        return "no shadow tables"
    once, never, twice, proposed_twice, valid = conn.execute(_PROPOSALS.format(s=schema)).fetchone()
    exact = "exact" if twice == 0 and proposed_twice == 0 else "OFF"
    return (
        f"asks {once + never + twice}: read by one completed run {once}, by none {never}, "
        f"by two {twice}; {valid} valid proposals, asks proposed twice {proposed_twice} ({exact})"
    )


class LogWatch:
    """The warning and error lines each proxy log gained since the last look."""

    def __init__(self) -> None:
        self._seen: dict[Path, int] = {}

    def complaints(self, log: Path) -> list[str]:
        try:
            data = log.read_bytes()
        except OSError:
            return []
        start = self._seen.get(log, 0)
        self._seen[log] = len(data)
        text = data[start:].decode(errors="replace")
        return [
            line for line in text.splitlines() if re.search(r" (WARNING|ERROR|CRITICAL) ", line)
        ]


@contextlib.contextmanager
def on_server(url: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


def scalar(conn: Any, sql: str, *params: Any) -> Any:
    return conn.execute(sql, params).fetchone()[0]


def integrity(url: str, home: Path, schema: str) -> dict[str, int]:
    """What should not exist in ``schema``: unvalidated constraints, memory index rows that
    disagree with the memories, valid shadow evidence outside its own session."""
    found: dict[str, int] = {}
    with on_server(url) as conn:
        n = scalar(conn, "SELECT COUNT(*) FROM pg_constraint c JOIN pg_namespace n ON "
                         "n.oid = c.connamespace WHERE n.nspname = %s AND NOT c.convalidated",
                   schema)  # fmt: skip
        if n:
            found["unvalidated constraints"] = int(n)
        if scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", f"{schema}.shadow_proposal_evidence"):
            n = scalar(conn, f"""SELECT COUNT(*) FROM {schema}.shadow_proposal_evidence e
                JOIN {schema}.shadow_fact_proposals p ON p.id = e.proposal_id
                LEFT JOIN {schema}.transcript_messages t ON t.id = e.message_id
                WHERE p.validation_error IS NULL AND e.message_id IS NOT NULL
                  AND t.session_id IS DISTINCT FROM p.session_id""")  # fmt: skip
            if n:
                found["valid evidence outside its session"] = int(n)
    path = home / "projects" / "x-0000000000000000" / "ember.db"  # the schema is given
    db = PgDatabase(path, for_postgres(PROJECT), url=url, schema_name=schema, log_failures=False)
    try:
        found |= db.read(problems)
    finally:
        db.close()
    return found


def leaks(emulator: Emulator) -> tuple[int, int, int]:
    """Requests of one project carrying the other's memory; and how many of each project's
    requests carried one of its own (the check has teeth only when both are non-zero)."""
    wrong = own_a = own_b = 0
    for request in list(emulator.requests):
        text = json.dumps(request.json())
        if CWD_A in text:
            wrong += "[beta]" in text
            own_a += "[alpha]" in text
        elif CWD_B in text:
            wrong += "[alpha]" in text
            own_b += "[beta]" in text
    return wrong, own_a, own_b

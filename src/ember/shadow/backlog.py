"""Backlogs nobody is reading: unread messages of sessions no live session will read hot.

A run that was skipped (the budget), cancelled, cut off by a stopping proxy, or never started
(the process was killed) leaves its messages unread: the cursor moves only with completed runs.
A session that comes back reads them hot at its next quiet spell (its lineage is kept with the
project). One that never comes back is found here, when a session of the same project brings
credentials again, and read cold by the light model (the prefix is long gone), within the
budget like any run.

Only backlogs quiet for longer than the provider's cache lives are taken: a session that spoke
more recently may be live in another proxy on the same project, which reads it hot itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ember.shadow.spend_share import WINDOW_SECONDS
from ember.store.driver import Connection

#: A project is looked at most this often (seconds) by one process.
SWEEP_EVERY = 600.0
#: A backlog counts once its last message is this old (the provider's default cache TTL).
QUIET_SECONDS = 300.0
#: Backlogs started by one sweep at most (the oldest first; the next sweep takes more).
PER_SWEEP = 4


@dataclass(frozen=True)
class Backlog:
    session_id: str
    generation: int
    unread_from: int  # the highest seq already read (or skipped as history: ``cursors``)
    last_seq: int


_FIND = """
SELECT t.session_id, t.generation, MAX(t.seq), MAX(t.created_at),
       COALESCE((SELECT MAX(r.through_seq) FROM shadow_memory_runs r
                 WHERE r.session_id = t.session_id AND r.generation = t.generation
                   AND r.status = 'completed'), 0),
       COALESCE((SELECT c.baseline_seq FROM shadow_cursors c
                 WHERE c.session_id = t.session_id AND c.generation = t.generation),
                (SELECT s.through_seq FROM shadow_starts s
                 WHERE s.session_id = t.session_id AND s.generation = t.generation), 0)
FROM transcript_messages t
WHERE t.seq > (SELECT COALESCE(MAX(through_seq), 0) FROM shadow_activation)
  AND t.created_at >= ?
GROUP BY t.session_id, t.generation
ORDER BY MAX(t.seq)
"""


def find(conn: Connection, now: float | None = None) -> list[Backlog]:
    """Backlogs of the last budget window, quiet for ``QUIET_SECONDS``, oldest first."""
    now = time.time() if now is None else now
    out = []
    for session, generation, last, last_at, done, baseline in conn.execute(
        _FIND, (now - WINDOW_SECONDS,)
    ):
        read = max(int(done), int(baseline))
        if int(last) > read and float(last_at) <= now - QUIET_SECONDS:
            out.append(Backlog(str(session), int(generation), read, int(last)))
    return out

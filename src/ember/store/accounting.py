"""Per-exchange accounting rows, written off the request path by one writer thread.

The proxy must never wait on disk to answer a client, and SQLite wants one writer: ``submit``
only enqueues, a daemon thread drains the queue in batches (one transaction per database per
batch). A failed write is logged and dropped — accounting is observation; it never breaks a
request. Connections are kept in a small LRU so hundreds of projects do not exhaust file handles.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.protocols.base import Usage
from ember.store.db import connect, migrate
from ember.store.schema import MIGRATIONS

log = logging.getLogger(__name__)

_INSERT = """INSERT INTO exchanges (ts, session_id, project, protocol, model, status, outcome,
    stream, input_tokens, cache_read_tokens, cache_write_tokens, cache_write_1h_tokens,
    output_tokens, usage_known, cost_usd, price_snapshot, latency_ms, ttfb_ms)
    VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"""


@dataclass(frozen=True)
class ExchangeRecord:
    ts: float
    session_id: str
    project: str | None
    protocol: str
    model: str | None
    status: int
    outcome: str
    stream: bool
    usage: Usage | None
    cost_usd: float | None
    price_snapshot: str
    latency_ms: float
    ttfb_ms: float | None

    def row(self) -> tuple[Any, ...]:
        u = self.usage or Usage()
        return (
            self.ts,
            self.session_id,
            self.project,
            self.protocol,
            self.model,
            self.status,
            self.outcome,
            int(self.stream),
            u.input_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            u.cache_write_1h_tokens,
            u.output_tokens,
            int(self.usage is not None),
            self.cost_usd,
            self.price_snapshot,
            self.latency_ms,
            self.ttfb_ms,
        )


def open_db(path: Path) -> sqlite3.Connection:
    conn = connect(path)
    migrate(conn, MIGRATIONS)
    return conn


class AccountingWriter:
    def __init__(self, max_open: int = 32) -> None:
        self._queue: queue.Queue[tuple[Path, ExchangeRecord] | None] = queue.Queue()
        self._conns: OrderedDict[Path, sqlite3.Connection] = OrderedDict()
        self._max_open = max_open
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, db_path: Path, record: ExchangeRecord) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="ember-accounting", daemon=True
                )
                self._thread.start()
        self._queue.put((db_path, record))

    def flush(self) -> None:
        """Block until everything submitted so far is on disk (tests, shutdown, CLI)."""
        if self._thread is not None and self._thread.is_alive():
            self._queue.join()

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(10)
        self._thread = None

    def _conn(self, path: Path) -> sqlite3.Connection:
        conn = self._conns.pop(path, None) or open_db(path)
        self._conns[path] = conn
        while len(self._conns) > self._max_open:
            _, old = self._conns.popitem(last=False)
            old.close()
        return conn

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            batch = [item]
            while not self._queue.empty() and len(batch) < 500:
                batch.append(self._queue.get_nowait())
            try:
                self._write([b for b in batch if b is not None])
            finally:
                for _ in batch:
                    self._queue.task_done()
            if None in batch:
                for conn in self._conns.values():
                    conn.close()
                self._conns.clear()
                return

    def _write(self, batch: list[tuple[Path, ExchangeRecord]]) -> None:
        by_path: dict[Path, list[tuple[Any, ...]]] = {}
        for path, record in batch:
            by_path.setdefault(path, []).append(record.row())
        for path, rows in by_path.items():
            try:
                conn = self._conn(path)
                with conn:
                    conn.execute("BEGIN")
                    conn.executemany(_INSERT, rows)
            except Exception:
                log.warning("accounting write failed db=%s rows=%d", path, len(rows), exc_info=True)


def session_totals(path: Path) -> list[dict[str, Any]]:
    """Per-session totals, most recent first; an empty list when nothing was recorded."""
    if not path.is_file():
        return []
    conn = open_db(path)
    try:
        rows = conn.execute("SELECT * FROM session_totals ORDER BY last_seen DESC").fetchall()
        return [dict(r) for r in rows]
    finally:
        conn.close()


def exchanges(path: Path, session_id: str | None = None) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    conn = open_db(path)
    try:
        sql = "SELECT * FROM exchanges"
        args: tuple[Any, ...] = ()
        if session_id:
            sql += " WHERE session_id=?"
            args = (session_id,)
        return [dict(r) for r in conn.execute(sql + " ORDER BY id", args)]
    finally:
        conn.close()

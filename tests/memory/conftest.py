"""Memory test fixtures: a deterministic stand-in embedder and stores on temporary files.

``HashEmbedder`` hashes stemmed words (and word bigrams) into 384 signed buckets: texts that
share words get a high cosine, unrelated texts a low one, the same text the same vector in
every process. It implements the ``Embedder`` protocol, so the store cannot tell it from the
real model; it is what lets these tests run in milliseconds without the ONNX weights.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ember.memory.core import HierarchicalMemory
from ember.store.database import Database
from ember.store.schema import PROJECT, for_postgres

_WORD = re.compile(r"[a-z0-9]+")


def _stem(w: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


class HashEmbedder:
    name = "test:hash"
    dim = 384

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = [_stem(w) for w in _WORD.findall(text.lower())]
            feats = words + [a + " " + b for a, b in itertools.pairwise(words)]
            for f in feats:
                h = hashlib.blake2b(f.encode(), digest_size=8).digest()
                idx = int.from_bytes(h[:4], "little") % self.dim
                out[row, idx] += 1.0 if h[4] & 1 else -1.0
            if not feats:
                out[row, 0] = 1.0
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


class Clock:
    """A settable clock so validity windows and recency are exact in tests."""

    def __init__(self, now: float = 1_790_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


OpenStore = Callable[..., HierarchicalMemory]


@pytest.fixture(params=["sqlite-vec", "hnsw"])
def index_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_store(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    embedder: HashEmbedder,
    clock: Clock,
    index_kind: str,
) -> Iterator[OpenStore]:
    """Open (or re-open) a store at ``tmp_path/<name>/ember.db`` with either vector index;
    ``index_kind`` "postgres" (a test parametrized over it): in the schema that path maps to
    on a fresh PostgreSQL database (``pg_url``), each open a new owner as a process's."""
    opened: list[HierarchicalMemory] = []
    owners: list[Database] = []

    def open_(name: str = "p", **kw: object) -> HierarchicalMemory:
        kw.setdefault("clock", clock)
        emb = kw.pop("embedder", embedder)
        path = tmp_path / name / "ember.db"
        where: Database | Path = path
        if index_kind == "postgres":
            where = pg_database(request.getfixturevalue("pg_url"), tmp_path, path)
            owners.append(where)
        else:
            kw.setdefault("vector_index", index_kind)
        store = HierarchicalMemory(where, emb, **kw)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield open_
    for s in opened:
        s.close()
    for db in owners:
        db.close()


def pg_database(url: str, home: Path, path: Path) -> Database:
    """The owner a PostgreSQL store gives the project file ``path`` (its schema on ``url``)."""
    from ember.store.pg.database import PgDatabase
    from ember.store.pg.names import schema_name

    return PgDatabase(
        path,
        for_postgres(PROJECT),
        url=url,
        schema_name=schema_name(home, path),
        log_failures=False,
    )


@pytest.fixture
def store(open_store: OpenStore) -> HierarchicalMemory:
    return open_store()


class _Rows(list[Any]):
    def fetchone(self) -> Any:
        return self[0] if self else None

    def fetchall(self) -> list[Any]:
        return list(self)


class RawSql:
    """Look inside a store's file with plain SQL (through its owner's read connections)."""

    def __init__(self, store: HierarchicalMemory) -> None:
        self._db = store.database

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> _Rows:
        return _Rows(self._db.read(lambda c: c.execute(sql, args).fetchall()))

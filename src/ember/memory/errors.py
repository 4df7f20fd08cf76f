"""Errors of the memory library, inside ember's one hierarchy (``ember.errors.EmberError``).

    EmberError
     +-- MemoryError_            anything the memory library raises on purpose
          +-- MemoryInputError   bad input (import line, save payload): what, and the fix
          |    +-- SecretRefused  the fact is nothing but a secret (a key, a password)
          +-- MemoryNotFound     no memory with that id in this project
          +-- MemoryStoreError   the project's memory file cannot be opened or written
               +-- VectorIndexUnavailable  the requested vector index cannot be loaded

Lower-layer failures (sqlite3/sqlean errors, hnswlib, a broken index file) are mapped onto
``MemoryStoreError`` at the boundary with ``raise ... from``, so the proxy only has to catch
``MemoryError_`` (plus the embedder's ``EmbedderError``) to fail open.
"""

from __future__ import annotations

import sys

from ember.errors import EmberError, StorageError
from ember.store.driver import errors as sqlite_errors


class MemoryError_(EmberError):  # the builtin name MemoryError is taken
    """Base class of every error the memory library raises deliberately."""


class MemoryInputError(MemoryError_):
    """Input that cannot become a memory; the message names the field and the fix."""


class SecretRefused(MemoryInputError):
    """The fact is nothing but a secret: a memory never holds one (``ember.redaction``)."""


class MemoryNotFound(MemoryError_):
    """The id names no memory in this project's store (it never existed or was deleted)."""


class MemoryStoreError(MemoryError_):
    """The memory store cannot be opened, migrated or written."""


class VectorIndexUnavailable(MemoryStoreError):
    """``memory_vector_index`` asked for an index this machine cannot load."""


def store_errors() -> tuple[type[Exception], ...]:
    """What the storage layer raises when a store cannot be read or written, for the memory
    library to map onto ``MemoryStoreError`` (callers catch one memory error): the store's own
    errors, SQLite's, and psycopg's once a PostgreSQL store loaded it (a statement the server
    refused is a memory error too, never a raw driver error in a request). psycopg is not
    imported for a process that only has SQLite files."""
    psycopg = sys.modules.get("psycopg")
    own = (StorageError, sqlite_errors.Error)
    return own if psycopg is None else (*own, psycopg.Error)

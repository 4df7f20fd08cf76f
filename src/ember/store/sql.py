"""What a feature may ask of a store connection, on either backend.

A feature's query functions take a connection and run the SQL common to SQLite and
PostgreSQL on it (``?`` marks, rows read by index and by name). Where the two differ, or where
a write needs a guarantee one backend gives for free, the feature asks here and never looks
at a backend's own types: a feature that imported the PostgreSQL backend's modules (or tested
``isinstance`` on them) broke the day that backend changed, and took the server's code along
into every process that only ever opens files.

- ``dialect(conn)``: which SQL ``conn`` speaks (``"sqlite"`` or ``"postgres"``), for a
  statement the function then says in full for each.
- ``truncated(expr)``: the whole part of a non-negative number (an hour, a day) in each
  dialect: a plain cast rounds on PostgreSQL and put a request made after noon on the next day.
- ``one_writer(conn)``: run this read-modify-write as the schema's one writer. On SQLite the
  writer already runs alone (nothing to do); on PostgreSQL, without it, two proxies read the
  same old row and the later commit overwrites what the other added.

The database behind a connection answers the same way (``Database.dialect``), and the
home-level questions (where the home's own data is, which databases a store holds) are the
``Storage``'s (``registry``). Each answer is implemented for both backends.
"""

from __future__ import annotations

from ember.store.pg.connection import Dialect, dialect, truncated
from ember.store.pg.serial import one_writer

__all__ = ["Dialect", "dialect", "one_writer", "truncated"]

"""What ``ember doctor`` says of compression's originals: how many each project keeps, how
much, since when, against the bounds they are pruned to (read-only)."""

from __future__ import annotations

import time
from pathlib import Path

from ember.compress.ledger import held
from ember.compress.settings import CompressSettings
from ember.config import Settings
from ember.store.driver import connect, errors


def originals(settings: Settings, databases: list[Path]) -> list[tuple[Path, str]]:
    """(database, one line) for each project database keeping originals."""
    options = settings.section(CompressSettings)
    bounds = f"kept {options.compress_keep_days:g} days, at most {options.compress_keep_mb:g} MB"
    out = []
    for db in databases:
        try:
            conn = connect(db, readonly=True).conn
        except errors.Error:
            continue
        try:
            count, size, oldest = held(conn)
        except errors.Error:
            continue  # a database without the table (no compression there yet)
        finally:
            conn.close()
        if not count:
            continue
        age = (time.time() - oldest) / 86400 if oldest is not None else 0.0
        out.append(
            (
                db,
                f"compression: {count} original(s) kept for ember_retrieve, "
                f"{size / 1024 / 1024:.1f} MB, the oldest {age:.1f} days ({bounds})",
            )
        )
    return out

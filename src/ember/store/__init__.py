"""Storage: one SQLite file per project (or the global stats file), schema by named migrations."""

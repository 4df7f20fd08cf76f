"""Cross-session memory: scoped, time-valid facts in one SQLite file per project."""

"""The PostgreSQL store: the same data as the SQLite files, one schema per project.
See docs/architecture.md, "PostgreSQL"."""

"""Export memories into the files agents already read (Claude Code, Codex, Cursor, markdown)."""

from ember.memory.writers.base import WRITERS, ExportResult, Writer, export, writer_for

__all__ = ["WRITERS", "ExportResult", "Writer", "export", "writer_for"]

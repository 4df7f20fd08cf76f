"""Agents' own session logs, read into one model (``ember.learn.model``).

One module per agent format (``claude``, ``codex``, ``gemini``, ``grok``, ``opencode``), the
shared streaming helpers (``base``), the reader registry with its entry point group
(``registry``) and where logs are found (``discovery``).
"""

from ember.learn.logs.base import LogReader, LogSource
from ember.learn.logs.discovery import Scan, scan, sources
from ember.learn.logs.registry import ENTRY_POINT_GROUP, readers

__all__ = ["ENTRY_POINT_GROUP", "LogReader", "LogSource", "Scan", "readers", "scan", "sources"]

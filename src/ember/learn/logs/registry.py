"""Which readers exist: the built-in ones, then third-party ones from the
``ember.learn.readers`` entry point group (a package declares, in its ``pyproject.toml``,
``[project.entry-points."ember.learn.readers"] myagent = "pkg.module:MyReader"``).

A third-party reader that fails to load, or does not look like a :class:`LogReader`, is left
out with a warning naming it: a broken plugin must not take ``ember learn`` down with it. One
with the name of a built-in reader replaces it (that is how a user patches a format).
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from ember.learn.logs.base import LogReader
from ember.learn.logs.claude import ClaudeReader
from ember.learn.logs.codex import CodexReader
from ember.learn.logs.gemini import GeminiReader
from ember.learn.logs.grok import GrokReader
from ember.learn.logs.opencode import OpenCodeReader

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "readers"]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "ember.learn.readers"
BUILTIN: tuple[type[LogReader], ...] = (
    ClaudeReader,
    CodexReader,
    GeminiReader,
    GrokReader,
    OpenCodeReader,
)


def readers() -> dict[str, LogReader]:
    """Every available reader by its ``--agent`` name, built-in ones first."""
    found: dict[str, LogReader] = {}
    for cls in BUILTIN:
        reader = cls()
        found[reader.name] = reader
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = ep.load()
            reader = loaded() if isinstance(loaded, type) else loaded
        except Exception as exc:  # a third-party module may raise anything on import
            log.warning("log reader %r (%s) failed to load: %s", ep.name, ep.value, exc)
            continue
        if not isinstance(reader, LogReader) or not isinstance(getattr(reader, "name", None), str):
            log.warning("log reader %r (%s) is not a LogReader; ignored", ep.name, ep.value)
            continue
        found[reader.name] = reader
    return found

"""Logging set-up for the command-line edge only (the library never installs handlers).

Lines are ``time level logger message``; messages carry ``key=value`` pairs. Prompts, answers
and API keys are never logged at INFO or above.

A log file (``ember proxy --log-file``: the proxy ``ember wrap`` starts in the background) is
appended to and rotated at ``LOG_FILE_BYTES``, keeping ``LOG_FILE_BACKUPS`` older files, so a
later wrap neither erases what the run before logged nor lets the file grow without end. The
process's own stdout and stderr (what uvicorn and a crash write) point at the same file: they
follow it to the new file at each rotation.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import sys
from pathlib import Path
from typing import IO

#: A log file's size before it is rotated (bytes), and how many rotated files are kept.
LOG_FILE_BYTES = 5 * 1024 * 1024
LOG_FILE_BACKUPS = 3


def configure(level: str = "info", file: Path | None = None) -> None:
    handler: logging.Handler
    if file is None:
        handler = logging.StreamHandler(sys.stderr)
    else:
        file.parent.mkdir(parents=True, exist_ok=True)
        handler = RotatingLog(file)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s", "%H:%M:%S")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("uvicorn.error").setLevel(level.upper())


class RotatingLog(logging.handlers.RotatingFileHandler):
    """A rotated log file that takes stdout and stderr along when they write to it."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            path, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8"
        )

    def doRollover(self) -> None:
        following = [fd for fd in (1, 2) if self.stream is not None and _same(fd, self.stream)]
        for stream in (sys.stdout, sys.stderr):  # what they hold goes to the old file
            with contextlib.suppress(Exception):
                stream.flush()
        super().doRollover()
        if self.stream is not None:
            for fd in following:
                os.dup2(self.stream.fileno(), fd)


def _same(fd: int, stream: IO[str]) -> bool:
    try:
        return os.path.sameopenfile(fd, stream.fileno())
    except (OSError, ValueError):
        return False

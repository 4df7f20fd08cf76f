"""Logging set-up for the command-line edge only (the library never installs handlers).

Lines are ``time level logger message``; messages carry ``key=value`` pairs. Prompts and
answers are never logged at INFO or above; credentials at no level: every handler set up here
carries ``MaskCredentials``, which rewrites a record before any handler formats it — so
uvicorn's, the WebSocket library's and aiohttp's lines (their debug lines print handshake
headers) are masked like ember's own (``serve_forever`` leaves uvicorn's loggers to these
handlers instead of installing its own).

A log file (``ember proxy --log-file``: the proxy ``ember wrap`` starts in the background) is
appended to and rotated at ``LOG_FILE_BYTES``, keeping ``LOG_FILE_BACKUPS`` older files, so a
later wrap neither erases what the run before logged nor lets the file grow without end. The
process's own stdout and stderr (what uvicorn and a crash write) point at the same file: they
follow it to the new file at each rotation.
"""

from __future__ import annotations

import contextlib
import io
import logging
import logging.handlers
import os
import sys
from pathlib import Path
from typing import IO

from ember import fsutil
from ember.logmask import mask_line

#: A log file's size before it is rotated (bytes), and how many rotated files are kept.
LOG_FILE_BYTES = 5 * 1024 * 1024
LOG_FILE_BACKUPS = 3


def configure(level: str = "info", file: Path | None = None) -> None:
    handler: logging.Handler
    if file is None:
        handler = logging.StreamHandler(sys.stderr)
    else:
        fsutil.private_dirs(file.parent)
        handler = RotatingLog(file)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s", "%H:%M:%S")
    )
    handler.addFilter(MaskCredentials())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("uvicorn.error").setLevel(level.upper())


def configured() -> bool:
    """Whether ``configure`` set up this process's logging (its handlers mask credentials)."""
    return any(
        isinstance(f, MaskCredentials) for h in logging.getLogger().handlers for f in h.filters
    )


class MaskCredentials(logging.Filter):
    """Masks credentials in a record's message, exception text and stack (``mask_line``),
    in place: the record is formatted once here, masked, and every handler after this one
    formats the masked text. A record whose arguments do not fit its format is masked as
    its parts (logging would print them raw to stderr)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "ember_masked", False):
            return True
        try:
            message = record.getMessage()
        except Exception:  # logging's own report would print the arguments raw
            message = f"(a log line that failed to format) {record.msg!r} {record.args!r}"
        record.msg, record.args = mask_line(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _FORMAT.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_line(record.exc_text)
        if record.stack_info:
            record.stack_info = mask_line(record.stack_info)
        record.ember_masked = True
        return True


_FORMAT = logging.Formatter()


class RotatingLog(logging.handlers.RotatingFileHandler):
    """A rotated log file, private to the user (0600, each new file too), that takes stdout
    and stderr along when they write to it."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            path, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8"
        )

    def _open(self) -> io.TextIOWrapper:
        fd = fsutil.open_private(Path(self.baseFilename), os.O_WRONLY | os.O_APPEND)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)

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

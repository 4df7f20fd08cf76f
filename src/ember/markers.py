"""Ember's block inside a user's file, between ``<!-- ember:<name>:start -->`` and
``<!-- ember:<name>:end -->`` (pure).

Every feature that writes into a file the user also edits (``ember memory export``,
``ember learn``) owns exactly one span, named after it, and nothing else:

- a rewrite replaces exactly that span; every byte before and after it stays as it was;
- a file without the markers gets the block appended after one blank line;
- a file whose markers are broken (a start with no end, an end before the start, two starts)
  is refused: guessing where the block ends could delete the user's own text;
- ``remove`` takes the span out again (moving a block from one file to another) and only the
  blank line ember put in front of it, never the user's text (a last line that had no line
  break keeps the one appending had to add).

Spans of different names never interfere: the memory block and the learn block can share a
file, and each rewrite leaves the other one alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ember.errors import EmberError

_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


class MarkerError(EmberError):
    """A file's ember markers are broken; the message names the file and the fix."""


@dataclass(frozen=True)
class Span:
    """Where a block sits: ``text[start:end]`` is the block, markers included."""

    start: int
    end: int


@dataclass(frozen=True)
class Markers:
    """The marker pair of one feature (``Markers("learn")``)."""

    name: str

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"marker name must be lowercase letters, digits or '-': {self.name!r}")

    @property
    def start(self) -> str:
        return f"<!-- ember:{self.name}:start -->"

    @property
    def end(self) -> str:
        return f"<!-- ember:{self.name}:end -->"

    def wrap(self, body: str, newline: str = "\n") -> str:
        """``body`` between the markers (no trailing newline after the end marker)."""
        return newline.join([self.start, *body.splitlines(), self.end])

    def find(self, text: str, *, where: str = "the file") -> Span | None:
        """The block's span, None when the file has no markers; raises ``MarkerError`` when
        they are broken."""
        starts, ends = text.count(self.start), text.count(self.end)
        if starts == 0 and ends == 0:
            return None
        i, j = text.find(self.start), text.find(self.end)
        if starts != 1 or ends != 1 or j < i:
            raise MarkerError(
                f"{where} has unmatched ember markers ({starts} start, {ends} end); fix or "
                f"remove the lines {self.start!r} / {self.end!r} and run again"
            )
        return Span(i, j + len(self.end))

    def body(self, text: str, *, where: str = "the file") -> str | None:
        """What sits between the markers (without them), None when there is no block."""
        span = self.find(text, where=where)
        if span is None:
            return None
        inner = text[span.start + len(self.start) : span.end - len(self.end)]
        return inner.removeprefix("\r\n").removeprefix("\n")

    def merge(
        self, existing: str, block: str, *, where: str = "the file", newline: str = "\n"
    ) -> str:
        """``existing`` with its span replaced by ``block`` (which includes the markers), or
        ``block`` appended after one blank line when there is no span yet."""
        span = self.find(existing, where=where)
        if span is None:
            if not existing:
                return block + newline
            sep = "" if existing.endswith("\n") else newline
            return existing + sep + newline + block + newline
        return existing[: span.start] + block + existing[span.end :]

    def remove(self, existing: str, *, where: str = "the file") -> str:
        """``existing`` without the block: the inverse of appending it with ``merge`` (the
        line break after the end marker and the blank line before the start go with it)."""
        span = self.find(existing, where=where)
        if span is None:
            return existing
        before, after = existing[: span.start], existing[span.end :]
        for nl in ("\r\n", "\n"):
            if after.startswith(nl):
                after = after[len(nl) :]
                break
        for nl in ("\r\n", "\n"):
            if before.endswith(nl + nl) and not after:
                before = before[: -len(nl)]
                break
        if not before:
            after = after.removeprefix("\r\n").removeprefix("\n")
        if not before.strip() and not after:
            return ""
        return before + after

"""What the table commands print: one JSON document for scripts, and for people tables and
sentences that fit the terminal, 80 columns included.

Two failures this prevents:
- ``--json`` printing one object per line in some commands and one document in others, and
  nothing at all for an empty list: scripts had to guess; now every ``--json`` is one
  document (a list is an array, ``[]`` when empty);
- a table wider than the terminal squeezed by rich until "completed" read "comple / ted",
  and a sentence running past the right edge: tables here have no outer border, long cells
  are cut with "…" (``Clip``, and the table then says "--json for the full rows"), sentences
  are wrapped at the terminal's width.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

FULL_ROWS = "--json for the full rows"


def echo_json(doc: Any) -> None:
    """One JSON document on stdout, whatever the number of rows."""
    click.echo(json.dumps(doc, ensure_ascii=False, indent=2))


def console() -> Console:
    """The terminal's width (``COLUMNS``, else 80 when not a terminal); no guessed colours."""
    return Console(highlight=False)


def table(title: str | None = None) -> Table:
    """A table without outer border or edge padding: 4 more columns of room at 80 columns."""
    return Table(
        title=title,
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )


def say(*lines: str, style: str | None = None, out: Console | None = None) -> None:
    """Sentences wrapped at the terminal's width (``click.echo`` ran past the right edge)."""
    target = out or console()
    for line in lines:
        target.print(Text(line, style=style or ""), overflow="fold")


def count(n: int | float | None) -> str:
    """A token count in at most 6 characters: 999, 12.3k, 456k, 7.8M (exact in --json)."""
    if n is None:
        return "-"
    v = float(n)
    for limit, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= limit:
            scaled = v / limit
            return f"{scaled:.1f}{unit}" if abs(scaled) < 100 else f"{scaled:.0f}{unit}"
    return f"{v:.0f}"


class Clip:
    """Cut cells to a width with "…", remembering whether anything was cut (the table then
    tells where the full rows are)."""

    def __init__(self) -> None:
        self.cut = False

    def __call__(self, text: str | None, width: int) -> str:
        value = text or "-"
        if cell_len(value) <= width:
            return value
        self.cut = True
        kept = ""
        for ch in value:
            if cell_len(kept + ch) > width - 1:
                break
            kept += ch
        return kept + "…"

    def hint(self, what: str = "long cells are cut") -> list[str]:
        return [f"{what}: {FULL_ROWS}."] if self.cut else []
